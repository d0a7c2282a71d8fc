"""The database side of the poll workers: pops for a group of intentions in one call."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import orjson

from queen_threads.polling import PollIntention, PopResult
from queen_threads.store import QueueStore


def request_for(intention: PollIntention, idx: int, stop_on_empty: bool) -> dict[str, Any]:
    """The stored function's pop request for one waiting intention (its own lease)."""
    return {
        "idx": idx,
        "queue": intention.queue,
        "partition": intention.partition,
        "namespace": intention.namespace,
        "task": intention.task,
        "consumerGroup": intention.consumer_group,
        "batch": intention.batch,
        "partitions": intention.partitions,
        "leaseId": str(uuid.uuid4()),
        "autoAck": intention.auto_ack,
        "subscriptionMode": intention.subscription_mode,
        "subscriptionFrom": intention.subscription_from,
        "stopOnEmpty": stop_on_empty,
    }


def lease_ids_of(result: dict[str, Any]) -> list[str]:
    lease = result.get("leaseId")
    return [lease] if lease else []


def result_body(result: dict[str, Any]) -> bytes:
    return orjson.dumps({k: val for k, val in result.items() if k != "idx"})


class DbPopper:
    """Implements the polling package's Popper over `QueueStore.pop`."""

    def __init__(self, store: QueueStore) -> None:
        self.store = store

    def pop_group(self, intentions: Sequence[PollIntention]) -> list[PopResult]:
        return self._pop(intentions, stop_on_empty=True)

    def pop_heads(self, intentions: Sequence[PollIntention]) -> list[PopResult]:
        return self._pop(intentions, stop_on_empty=False)

    def _pop(self, intentions: Sequence[PollIntention], stop_on_empty: bool) -> list[PopResult]:
        requests = [request_for(i, idx, stop_on_empty) for idx, i in enumerate(intentions)]
        results = self.store.pop(requests)
        out: list[PopResult] = []
        for intention, result in zip(intentions, results, strict=False):
            messages = result.get("messages") or []
            if messages:
                out.append(
                    PopResult(
                        intention.request_id,
                        200,
                        result_body(result),
                        lease_ids_of(result),
                        len(messages),
                    )
                )
            else:
                out.append(PopResult(intention.request_id, 204, None))
        return out

    def release(self, lease_ids: Sequence[str]) -> None:
        self.store.release_leases(lease_ids)
