"""The measuring points of the shared plumbing, composed in runtime.py: `TimedDatabase`
(every statement), `ObservedRequestStats` (every request), `MeteredAuthenticator` (its
refusals), and `observe_service`, the hook of the background services. The capabilities
measure themselves (queue/metrics.py, streams/metrics.py, kv/metrics.py, ...).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from queen_threads.auth import Authenticator
from queen_threads.background.exclusive import RunOutcome
from queen_threads.db import Database, Fetch, NamedCursor, Params, PoolConfig
from queen_threads.metrics.counters import ProcessCounters, RequestStats
from queen_threads.metrics.definitions import prom

# A context around one database call, by statement name: its OpenTelemetry span
# (telemetry/spans.py, StatementSpans.statement), when telemetry is on.
StatementSpan = Callable[[str], AbstractContextManager[None]]


class TimedDatabase(Database):
    """Database whose calls feed queen_db_query_duration_seconds (by statement name), each
    inside its span when `spans` is given."""

    def __init__(
        self,
        config: PoolConfig,
        counters: ProcessCounters | None = None,
        spans: StatementSpan | None = None,
    ) -> None:
        super().__init__(config)
        self.counters = counters
        self.spans = spans

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
        if self.spans is None:
            with self._timed(name):
                return super()._run(name, params, fetch)
        with self.spans(name), self._timed(name):
            return super()._run(name, params, fetch)

    @contextmanager
    def transaction(self) -> Iterator[NamedCursor]:
        if self.spans is None:
            with self._timed("transaction"), super().transaction() as tx:
                yield tx
            return
        with self.spans("transaction"), self._timed("transaction"), super().transaction() as tx:
            yield tx


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
