"""The database side of the poll workers: pops for a group of intentions in one call."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson

from queen_threads.polling import PopResult
from queen_threads.queue.intention import PollIntention
from queen_threads.queue.store import QueueStore


def request_for(intention: PollIntention, idx: int, stop_on_empty: bool) -> dict[str, Any]:
    """The stored function's pop request for one waiting intention (its own lease). Never
    acknowledged on delivery here: an autoAck long poll is acknowledged once its answer
    was written to the client (queue/routes/pop.py), so a departed client loses nothing.
    An empty pop reports its due time (`due`, schema/functions/29_pop_due.sql)."""
    arguments = intention.request.arguments(
        str(uuid.uuid4()), idx=idx, stop_on_empty=stop_on_empty, auto_ack=False
    )
    arguments["due"] = True
    return arguments


def lock_order(intention: PollIntention) -> tuple[str, ...]:
    """Where a head goes in a call of several groups' heads: by queue name (then namespace,
    task, partition, consumer group). One call is one transaction, and a group's first pop
    of a queue registers the group for it (`queen._register_group`) under the queue's
    registration lock, held until the commit: two processes whose calls named the same
    newly used queues in different orders (each its own registry's order) deadlocked, and
    PostgreSQL ends a deadlock only after `deadlock_timeout` (1 s), with both poll workers
    stuck and every wake-up of their groups waiting (issue 41). In one order everywhere
    two calls can wait for each other, but never in a circle."""
    request = intention.request
    return (
        request.queue or "",
        request.namespace or "",
        request.task or "",
        request.partition or "",
        request.consumer_group or "",
    )


def empty_result(request_id: str, result: dict[str, Any], took_s: float) -> PopResult:
    """A 204 with the pop's due time and whether a concurrent transaction held a candidate
    (`contended`). `dueInMs` counts from the database's now(), which came somewhere within
    the call's `took_s`: counted as if it came at the call's start, the timer errs early by
    at most the call's duration, and the pop it starts reaches the database about when
    its predecessor did after its start, so around the due time. (Counted from the answer,
    every delivery would come a whole call late; a pop that comes too early finds nothing
    and a due time a few ms on.)"""
    due_ms = result.get("dueInMs")
    due_in = max(0.0, due_ms / 1000.0 - took_s) if isinstance(due_ms, int | float) else None
    return PopResult(request_id, 204, None, due_in=due_in, contended=bool(result.get("contended")))


def auto_ack_answer(body: bytes) -> tuple[bytes, list[dict[str, Any]]]:
    """An autoAck long poll's answer as the client expects it (no lease ids), and the acks
    that complete its messages once it was written (the lease holds them until then)."""
    result = orjson.loads(body)
    acks = []
    for message in result.get("messages") or ():
        acks.append(
            {
                "transactionId": message["transactionId"],
                "partitionId": message["partitionId"],
                "status": "completed",
                "error": None,
                "consumerGroup": message["consumerGroup"],
                "leaseId": message["leaseId"] or None,
            }
        )
        message["leaseId"] = ""
    result["leaseId"] = ""
    return orjson.dumps(result), acks


def lease_ids_of(result: dict[str, Any]) -> list[str]:
    lease = result.get("leaseId")
    return [lease] if lease else []


def result_body(result: dict[str, Any]) -> bytes:
    return orjson.dumps({k: val for k, val in result.items() if k != "idx"})


class DbPopper:
    """Implements the polling package's Popper over `QueueStore.pop`."""

    def __init__(self, store: QueueStore) -> None:
        self.store = store

    def pop_group(
        self, intentions: Sequence[PollIntention], partitions: Sequence[str] = ()
    ) -> list[PopResult]:
        return self._pop(intentions, partitions, stop_on_empty=True)

    def pop_heads(
        self, intentions: Sequence[PollIntention], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        """The heads of several groups in one call, in `lock_order` (results in the order
        given)."""
        order = sorted(range(len(intentions)), key=lambda i: lock_order(intentions[i]))
        named = list(partitions) + [None] * (len(intentions) - len(partitions))
        popped = self._pop(
            [intentions[i] for i in order], [named[i] for i in order], stop_on_empty=False
        )
        by_index = dict(zip(order, popped, strict=True))
        return [by_index[i] for i in range(len(intentions))]

    def _pop(
        self,
        intentions: Sequence[PollIntention],
        partitions: Sequence[str | None],
        stop_on_empty: bool,
    ) -> list[PopResult]:
        requests = [request_for(i, idx, stop_on_empty) for idx, i in enumerate(intentions)]
        for request, partition in zip(requests, partitions, strict=False):
            # (linger) the partition whose messages are ripe: a pop of the whole queue would
            # take whichever has waited longest, maybe one another process just took
            if partition is not None and request["queue"] and request["partition"] is None:
                request["partition"] = partition
        started = time.monotonic()
        results = self.store.pop(requests)
        took_s = time.monotonic() - started
        out: list[PopResult] = []
        for intention, request, result in zip(intentions, requests, results, strict=False):
            messages = result.get("messages") or []
            if messages:
                out.append(
                    PopResult(
                        intention.request_id,
                        200,
                        result_body(result),
                        lease_ids_of(result),
                        len(messages),
                        partitions=tuple({m.get("partition") or "" for m in messages}),
                    )
                )
            else:
                empty = empty_result(intention.request_id, result, took_s)
                if partition := request.get("partition"):  # what came back empty, exactly
                    empty = replace(empty, partitions=(partition,))
                out.append(empty)
        return out

    def release(self, lease_ids: Sequence[str]) -> None:
        self.store.release_leases(lease_ids)
