"""Bulk requeue from the dead-letter queue (POST /api/v1/dlq/requeue), chunk by chunk.

A run may select many thousands of messages. Doing them in one transaction would hold
the partitions' push locks for the whole run and show consumers nothing until the end, so
the run is cut into chunks of at most `CHUNK_SIZE` messages, each one stored-function call
(`queen.requeue_dlq_chunk_v1`: its own transaction). With `perSecond`, chunks shrink to
that size and start no earlier than `done / perSecond` seconds after the first, waiting in
the request's greenlet (gevent.sleep: the worker serves other requests meanwhile), so a
reprocessing run does not flood the consumers. Between chunks the run stops early when
told to (the client went away): what was requeued stays requeued, and a rerun with the
same selection continues with what is left, in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import gevent

from queen_threads.dlq.store import DlqStore
from queen_threads.polling.clock import Clock

CHUNK_SIZE = 500  # messages per transaction without a rate (a few hundred ms of locks)
SAMPLE_SIZE = 10  # messages a dry run shows


@dataclass(frozen=True)
class Selection:
    """Which DLQ rows a run takes (every filter optional, all of them ANDed)."""

    queue: str | None = None
    partition: str | None = None
    consumer_group: str | None = None
    error: str | None = None
    from_ts: datetime | None = None
    to_ts: datetime | None = None
    ids: tuple[tuple[str, str], ...] | None = None  # (partitionId, transactionId)

    def is_empty(self) -> bool:
        return all(getattr(self, f) is None for f in self.__dataclass_fields__)

    def as_json(self) -> dict[str, Any]:
        """The selection keys of the stored functions (85_dlq.sql)."""
        return {
            "queue": self.queue,
            "partition": self.partition,
            "consumerGroup": self.consumer_group,
            "error": self.error,
            "from": self.from_ts.isoformat() if self.from_ts else None,
            "to": self.to_ts.isoformat() if self.to_ts else None,
            "ids": None
            if self.ids is None
            else [{"partitionId": p, "transactionId": t} for p, t in self.ids],
        }


@dataclass(frozen=True)
class RequeuePlan:
    selection: Selection
    limit: int
    per_second: int | None = None
    dry_run: bool = False

    @property
    def chunk_size(self) -> int:
        return min(CHUNK_SIZE, self.per_second or CHUNK_SIZE, self.limit)


def never() -> bool:
    return False


class DlqRequeuer:
    """Runs a `RequeuePlan` against the store; the answer of the route."""

    def __init__(
        self,
        store: DlqStore,
        sleep: Callable[[float], None] = gevent.sleep,
        clock: Clock = time.monotonic,
    ) -> None:
        self.store = store
        self.sleep = sleep
        self.clock = clock

    def run(self, plan: RequeuePlan, stop: Callable[[], bool] = never) -> dict[str, Any]:
        """{dryRun, matched, requeued, partitions, limit, perSecond, durationMs} (+ sample
        on a dry run). `matched`: messages the selection matched when the run started,
        regardless of `limit`; `partitions`: how many got copies (dry run: matched)."""
        started = self.clock()
        selection = plan.selection.as_json()
        preview = self.store.dlq_requeue_preview(selection, SAMPLE_SIZE if plan.dry_run else 0)
        answer: dict[str, Any] = {
            "dryRun": plan.dry_run,
            "matched": preview["matched"],
            "requeued": 0,
            "partitions": preview["partitions"],
            "limit": plan.limit,
            "perSecond": plan.per_second,
        }
        if plan.dry_run:
            answer["sample"] = preview["sample"]
        else:
            answer["requeued"], answer["partitions"] = self._requeue(plan, selection, stop)
        answer["durationMs"] = round((self.clock() - started) * 1000)
        return answer

    def _requeue(
        self, plan: RequeuePlan, selection: dict[str, Any], stop: Callable[[], bool]
    ) -> tuple[int, int]:
        """(messages requeued, partitions that got copies)."""
        done, resume = 0, None
        partitions: set[str] = set()
        first = self.clock()
        while done < plan.limit:
            if done:
                if stop():
                    break
                self._pace(plan, first, done)
            size = min(plan.chunk_size, plan.limit - done)
            chunk = self.store.dlq_requeue_chunk(selection, size, resume)
            done += chunk["requeued"]
            partitions.update(chunk["partitions"])
            resume = chunk["lastPartitionId"]
            if chunk["requeued"] < size:
                break  # nothing left that matches
        return done, len(partitions)

    def _pace(self, plan: RequeuePlan, first: float, done: int) -> None:
        """Wait until `done` messages are within the rate counted from the first chunk."""
        if plan.per_second:
            wait = first + done / plan.per_second - self.clock()
            if wait > 0:
                self.sleep(wait)
