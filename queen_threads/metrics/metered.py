"""The measuring points of the shared plumbing, each an observer handed to what it
observes (composed in runtime.py): `StatementMetrics` (every database call,
`Database(observer=...)`), `RequestMetrics` (every request, `RequestContext`),
`AuthMetrics` (the authenticator's refusals) and `ServiceMetrics` (the background
services' turns). The capabilities measure themselves the same way (queue/metrics.py,
streams/metrics.py, kv/metrics.py, ...).
"""

from __future__ import annotations

import time
from typing import Any

from queen_threads.background.exclusive import RunOutcome
from queen_threads.metrics.counters import ProcessCounters, RequestStats
from queen_threads.metrics.definitions import prom


class StatementMetrics:
    """The database's observer: every call's duration by statement name
    (queen_db_query_duration_seconds), its failures (queen_db_errors_total) and the JSON
    counters. On every request's path, so each statement's histogram child is looked up
    once and kept (the names are the named statements, a fixed set)."""

    def __init__(self, counters: ProcessCounters | None = None) -> None:
        self.counters = counters
        self._durations: dict[str, Any] = {}

    def ran(self, name: str, elapsed_s: float, failed: bool) -> None:
        duration = self._durations.get(name)
        if duration is None:
            duration = self._durations[name] = prom().db_duration.labels(name)
        duration.observe(elapsed_s)
        if failed:
            prom().db_errors.labels(name).inc()
        if self.counters is not None:
            self.counters.db_call(elapsed_s, failed)


class RequestMetrics:
    """The requests' observer: this process's request counts (`stats`, the JSON
    /metrics) and queen_http_requests_total / queen_http_request_duration_seconds."""

    def __init__(self, stats: RequestStats) -> None:
        self.stats = stats

    def begin(self) -> None:
        self.stats.begin()

    def record(self, status: int, elapsed_ms: float) -> None:
        self.stats.record(status, elapsed_ms)
        metrics = prom()
        metrics.http_requests.labels(str(status)).inc()
        metrics.http_duration.observe(elapsed_ms / 1000)


class AuthMetrics:
    """The authenticator's observer: refusals by kind (queen_auth_failures_total)."""

    def refused(self, kind: str) -> None:
        prom().auth_failures.labels(kind).inc()


_DELETED_KINDS = (
    ("retention", "retention"),
    ("completedRetention", "completed_retention"),
    ("eviction", "max_wait_time_eviction"),
)


class ServiceMetrics:
    """The background services' observer (`ExclusiveService(observer=...)`): only turns
    that ran or failed count."""

    def ran(self, service: str, outcome: RunOutcome) -> None:
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
