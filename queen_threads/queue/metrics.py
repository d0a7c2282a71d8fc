"""The queue core's measuring points: what the database did (pushes, deliveries, acks, by
queue: Prometheus, the JSON counters and the analytics minutes), every long-poll wait, and
the pushes the failover buffer took.

Observers, never subclasses: the store takes `QueueMetrics` (queue/store.py's
`QueueObserver`), the polling service `WaitMetrics`, the queue service `count_buffered`.
The other capabilities count the same way (streams/metrics.py, kv/metrics.py,
streams_sdk/metrics.py).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable
from typing import Any

from queen_threads.metrics.counters import ProcessCounters
from queen_threads.metrics.definitions import prom
from queen_threads.metrics.labels import inc, inc_counts
from queen_threads.metrics.minutes import QueueMinutes
from queen_threads.polling import Response
from queen_threads.queue.intention import PollIntention


class QueueMetrics:
    """The queue store's observer (`QueueStore(observer=...)`): counts what the database
    did, pushes, deliveries, acks, by queue (in Prometheus, the JSON counters and the
    analytics minutes), and the messages that could not be decrypted. The timers' fire
    and the admin reads tell it theirs too (`stored_by_timers`, `decryption_failed`)."""

    def __init__(
        self, counters: ProcessCounters | None = None, minutes: QueueMinutes | None = None
    ) -> None:
        self.counters = counters
        self.minutes = minutes

    def _pushed(self, pairs: Iterable[tuple[str, str]]) -> collections.Counter[tuple[str, str]]:
        """Count (queue, status) pairs of push results, one pass; the counts."""
        counts = collections.Counter(pairs)
        inc_counts(prom().pushed, counts)
        queued = {queue: n for (queue, status), n in counts.items() if status == "queued"}
        if self.counters is not None:
            self.counters.pushed.add(sum(queued.values()))
        if self.minutes is not None:
            self.minutes.add_counts("pushed", queued)
        return counts

    def pushed(self, items: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
        counts = self._pushed(
            (str(item.get("queue") or ""), str(result.get("status") or "failed"))
            for item, result in zip(items, results, strict=False)
        )
        if any(status == "failed" for _, status in counts):
            _count_rejected(results)

    def stored_by_timers(self, counts: dict[str, int]) -> None:
        """Messages the timers' fire stored, per queue (pushes by another path)."""
        self._pushed((queue, "queued") for queue, n in counts.items() for _ in range(int(n)))

    def popped(self, results: list[dict[str, Any]]) -> None:
        delivered = [
            (str(m.get("queue") or ""),) for result in results for m in result.get("messages") or ()
        ]
        if delivered:
            inc(prom().popped, delivered)
            if self.counters is not None:
                self.counters.popped.add(len(delivered))
            if self.minutes is not None:
                self.minutes.add("popped", (queue for (queue,) in delivered))

    def decryption_failed(self, message: dict[str, Any], reason: str) -> None:
        """An outgoing message could not be decrypted (already logged)."""
        prom().decryption_errors.labels(str(message.get("queue") or "")).inc()
        if self.counters is not None:
            self.counters.decryption_errors.add(1)

    def _acked(self, pairs: list[tuple[str, str]]) -> None:
        inc(prom().acked, pairs)
        if self.counters is not None:
            self.counters.acked.add(sum(1 for _, status in pairs if status != "rejected"))
        if self.minutes is not None:
            self.minutes.add_acks(pairs)

    def acked(self, results: list[dict[str, Any]]) -> None:
        self._acked(
            [
                (
                    str(r.get("queueName") or ""),
                    str(r.get("status") or "completed") if r.get("success") else "rejected",
                )
                for r in results
            ]
        )

    def transacted(self, result: dict[str, Any]) -> None:
        _count_rejected(r for r in result.get("results") or () if r.get("type") == "push")
        if result.get("success"):
            rows = result.get("results") or []
            self._pushed(
                [
                    (str(r.get("queueName") or ""), str(r.get("status") or "queued"))
                    for r in rows
                    if r.get("type") == "push"
                ]
            )
            self._acked(
                [
                    (str(r.get("queueName") or ""), str(r.get("status") or "completed"))
                    for r in rows
                    if r.get("type") == "ack"
                ]
            )


def _count_rejected(results: Iterable[dict[str, Any]]) -> None:
    """queen_push_rejected_total: push results the database refused, with their reason."""
    inc(
        prom().push_rejected,
        (
            (str(r.get("queueName") or ""), str(r["reason"]))
            for r in results
            if r.get("reason") and r.get("status") == "failed"
        ),
    )


class WaitMetrics:
    """The polling service's observer: times every long-poll wait
    (queen_long_poll_wait_seconds) and counts those on a queue in the analytics minutes."""

    def __init__(self, minutes: QueueMinutes | None = None) -> None:
        self.minutes = minutes

    def waited(self, intention: PollIntention, answer: Response | None, refused: bool) -> None:
        outcome = "rejected" if refused else _wait_outcome(answer)
        waited = time.monotonic() - intention.created_at
        prom().long_poll_wait.labels(outcome).observe(max(0.0, waited))
        queue = intention.request.queue
        if self.minutes is not None and queue and outcome != "rejected":
            self.minutes.add("pollWaits", (queue,))


def _wait_outcome(answer: Response | None) -> str:
    if answer is None:
        return "disconnected"
    return "messages" if answer.status == 200 and answer.body else "timeout"


def count_buffered(items: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
    """Push results of the HTTP path: count the items the failover buffer took."""
    inc(
        prom().pushed,
        (
            (str(item.get("queue") or ""), "buffered")
            for item, result in zip(items, results, strict=False)
            if result.get("status") == "buffered"
        ),
    )
