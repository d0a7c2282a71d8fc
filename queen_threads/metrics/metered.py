"""The measuring points: thin subclasses of the runtime's own objects, composed in runtime.py.

`TimedDatabase`, `MeteredQueueStore`, `MeteredPollingService`,
`ObservedRequestStats` and `MeteredAuthenticator` count every path once: HTTP pushes,
transactions and buffer replays all go through the store; immediate and long-poll pops
too. (The streams count through their store's observer, streams/metrics.py.)
`count_buffered` and `observe_service` are the hooks of the failover buffer and of the
background services.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from queen_threads.auth import Authenticator
from queen_threads.background.exclusive import RunOutcome
from queen_threads.crypto import PayloadCipher
from queen_threads.db import Database, Fetch, NamedCursor, Params, PoolConfig
from queen_threads.metrics.counters import ProcessCounters, RequestStats
from queen_threads.metrics.definitions import prom
from queen_threads.metrics.labels import inc, inc_counts
from queen_threads.metrics.minutes import QueueMinutes
from queen_threads.polling import Cover, PollIntention, Response
from queen_threads.queue.polling import PollingService
from queen_threads.queue.store import QueueStore
from queen_threads.settings import Settings


class TimedDatabase(Database):
    """Database whose calls feed queen_db_query_duration_seconds (by statement name)."""

    def __init__(self, config: PoolConfig, counters: ProcessCounters | None = None) -> None:
        super().__init__(config)
        self.counters = counters

    @contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            elapsed = time.perf_counter() - started
            metrics = prom()
            metrics.db_duration.labels(name).observe(elapsed)
            if failed:
                metrics.db_errors.labels(name).inc()
            if self.counters is not None:
                self.counters.db_call(elapsed, failed)

    def _run(self, name: str, params: Params, fetch: Fetch) -> Any:
        with self._timed(name):
            return super()._run(name, params, fetch)

    @contextmanager
    def transaction(self) -> Iterator[NamedCursor]:
        with self._timed("transaction"), super().transaction() as tx:
            yield tx


class MeteredQueueStore(QueueStore):
    """QueueStore counting what the database did: pushes, deliveries, acks, by queue (in
    Prometheus, the JSON counters and the analytics minutes)."""

    def __init__(
        self,
        db: Database,
        cipher: PayloadCipher | None = None,
        counters: ProcessCounters | None = None,
        minutes: QueueMinutes | None = None,
    ) -> None:
        super().__init__(db, cipher)
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

    def push(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = super().push(items)
        counts = self._pushed(
            (str(item.get("queue") or ""), str(result.get("status") or "failed"))
            for item, result in zip(items, results, strict=False)
        )
        if any(status == "failed" for _, status in counts):
            _count_rejected(results)
        return results

    def stored_by_timers(self, counts: dict[str, int]) -> None:
        self._pushed((queue, "queued") for queue, n in counts.items() for _ in range(int(n)))

    def pop(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        results = super().pop(requests)
        delivered = [
            (str(m.get("queue") or ""),) for result in results for m in result.get("messages") or ()
        ]
        if delivered:
            inc(prom().popped, delivered)
            if self.counters is not None:
                self.counters.popped.add(len(delivered))
            if self.minutes is not None:
                self.minutes.add("popped", (queue for (queue,) in delivered))
        return results

    def decryption_failed(self, message: dict[str, Any], reason: str) -> None:
        prom().decryption_errors.labels(str(message.get("queue") or "")).inc()
        if self.counters is not None:
            self.counters.decryption_errors.add(1)

    def _acked(self, pairs: list[tuple[str, str]]) -> None:
        inc(prom().acked, pairs)
        if self.counters is not None:
            self.counters.acked.add(sum(1 for _, status in pairs if status != "rejected"))
        if self.minutes is not None:
            self.minutes.add_acks(pairs)

    def ack(self, acks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = super().ack(acks)
        self._acked(
            [
                (
                    str(r.get("queueName") or ""),
                    str(r.get("status") or "completed") if r.get("success") else "rejected",
                )
                for r in results
            ]
        )
        return results

    def transaction(
        self,
        operations: list[dict[str, Any]],
        required_leases: list[str] | None = None,
        riders: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        result = super().transaction(operations, required_leases, riders)
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
        return result


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


class MeteredPollingService(PollingService):
    """PollingService timing every long-poll wait (queen_long_poll_wait_seconds) and
    counting those on a queue in the analytics minutes."""

    def __init__(
        self,
        settings: Settings,
        store: QueueStore,
        worker_id: int,
        minutes: QueueMinutes | None = None,
        cover: Cover | None = None,
    ) -> None:
        super().__init__(settings, store, worker_id, cover)
        self.minutes = minutes

    def wait(
        self, intention: PollIntention, is_disconnected: Any, watch: Any = None
    ) -> Response | None:
        outcome = "rejected"
        try:
            answer = super().wait(intention, is_disconnected, watch)
            outcome = _wait_outcome(answer)
            return answer
        finally:
            waited = time.monotonic() - intention.created_at
            prom().long_poll_wait.labels(outcome).observe(max(0.0, waited))
            queue = intention.request.queue
            if self.minutes is not None and queue and outcome != "rejected":
                self.minutes.add("pollWaits", (queue,))


def _wait_outcome(answer: Response | None) -> str:
    if answer is None:
        return "disconnected"
    return "messages" if answer.status == 200 and answer.body else "timeout"


class ObservedRequestStats(RequestStats):
    """RequestStats that also feeds the HTTP request counter and latency histogram."""

    def record(self, status: int, elapsed_ms: float) -> None:
        super().record(status, elapsed_ms)
        metrics = prom()
        metrics.http_requests.labels(str(status)).inc()
        metrics.http_duration.observe(elapsed_ms / 1000)


class MeteredAuthenticator(Authenticator):
    """Authenticator whose refusals also feed queen_auth_failures_total (by kind)."""

    def failed(self, kind: str) -> None:
        super().failed(kind)
        prom().auth_failures.labels(kind).inc()


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


_DELETED_KINDS = (
    ("retention", "retention"),
    ("completedRetention", "completed_retention"),
    ("eviction", "max_wait_time_eviction"),
)


def observe_service(service: str, outcome: RunOutcome) -> None:
    """Observer of the background services (only turns that ran or failed count)."""
    if outcome.status not in ("ran", "failed"):
        return
    metrics = prom()
    metrics.service_runs.labels(service, outcome.status).inc()
    metrics.service_duration.labels(service).observe(outcome.duration_s)
    if outcome.status != "ran":
        return
    metrics.service_last_success.labels(service).set(time.time())
    result = outcome.result
    for key, kind in _DELETED_KINDS:
        step = result.get(key)
        if isinstance(step, dict) and step.get("deleted"):
            metrics.cleanup_deleted.labels(kind).inc(int(step["deleted"]))
    ephemeral = result.get("ephemeral")
    if isinstance(ephemeral, dict):
        observe_ephemeral(ephemeral)
    if result.get("partitionsDeleted"):
        metrics.partitions_deleted.inc(int(result["partitionsDeleted"]))
    if result.get("kvExpired"):
        metrics.kv_expired.inc(int(result["kvExpired"]))


def observe_ephemeral(totals: dict[str, Any]) -> None:
    """The ephemeral queues' totals, as the eviction job read them (one process at a time
    runs it, so the gauges keep the most recent value of any process)."""
    metrics = prom()
    metrics.ephemeral_messages.set(int(totals.get("depth") or 0))
    metrics.ephemeral_bytes.set(int(totals.get("bytes") or 0))
    metrics.ephemeral_dropped.set(int(totals.get("dropped") or 0))
    metrics.ephemeral_in_flight.set(int(totals.get("inFlight") or 0))
    if totals.get("expired"):
        metrics.cleanup_deleted.labels("ephemeral_ttl").inc(int(totals["expired"]))
