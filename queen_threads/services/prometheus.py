"""Metrics: Prometheus (prometheus-client) for the whole server, plus this process's live
numbers for the JSON `/metrics`.

Multiprocess mode. gunicorn runs several worker processes; a scrape reaches one of them.
When `PROMETHEUS_MULTIPROC_DIR` is set (the gunicorn master sets it, see
config/gunicorn.conf.py) every process writes its counters, histograms and gauges to
files in that folder and a scrape merges the files of all processes: counters and
histograms are summed (those of exited workers included, so totals never go back), the
per-process gauges are summed over live processes (`livesum`; the master's `child_exit`
hook removes a dead worker's gauge files) and last-run timestamps take the maximum.
Without the variable (tests, a single process) the ordinary in-memory registry is used.

Gauges that describe the database (queue depth, consumer-group lag) are not stored per
process: `BacklogCollector` computes them at scrape time with one SQL statement.

The measuring points are thin subclasses of the runtime's own objects (`TimedDatabase`,
`MeteredQueueStore`, `MeteredPollingService`, `ObservedRequestStats`), so every path is
counted once: HTTP pushes, transactions and buffer replays all go through the store;
immediate and long-poll pops too.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import psycopg2.extensions
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from queen_threads import queries
from queen_threads.crypto import PayloadCipher
from queen_threads.db import Database, Params, PoolConfig
from queen_threads.polling import PollIntention, Response
from queen_threads.background.exclusive import RunOutcome
from queen_threads.queue.polling import PollingService
from queen_threads.services.stats import RequestStats
from queen_threads.store import QueueStore

if TYPE_CHECKING:
    from queen_threads.runtime import Runtime

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
QUEUE_MODE = "__QUEUE_MODE__"
BACKLOG_CACHE_S = 2.0
BACKLOG_TIMEOUT_MS = 5000


def multiprocess_mode() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


# -- the metric objects (one set per process) ---------------------------------------------
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_DB_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 120)


class PromMetrics:
    """Every metric queen-threads writes from inside a worker process."""

    def __init__(self) -> None:
        self.http_requests = Counter(
            "queen_http_requests_total", "HTTP requests answered, by status code.", ["code"]
        )
        self.http_duration = Histogram(
            "queen_http_request_duration_seconds",
            "Time from request start to response (long polls included).",
            buckets=_LATENCY_BUCKETS,
        )
        self.pushed = Counter(
            "queen_messages_pushed_total",
            "Pushed items by queue and outcome: queued (stored), duplicate (transactionId "
            "already in the partition), failed, buffered (failover file buffer).",
            ["queue", "status"],
        )
        self.popped = Counter(
            "queen_messages_popped_total", "Messages delivered by pops, by queue.", ["queue"]
        )
        self.acked = Counter(
            "queen_messages_acked_total",
            "Acknowledgements by queue and outcome (completed, failed_retry, failed_dlq, "
            "retry, already_acked, rejected).",
            ["queue", "status"],
        )
        self.decryption_errors = Counter(
            "queen_decryption_errors_total",
            "Messages of encrypted queues sent out with data null and a decryptionError "
            "marker (no key on this server, another key, damaged ciphertext), by queue.",
            ["queue"],
        )
        self.long_poll_wait = Histogram(
            "queen_long_poll_wait_seconds",
            "How long wait=true pops waited, by outcome (messages, timeout, disconnected, "
            "rejected).",
            ["outcome"],
            buckets=_WAIT_BUCKETS,
        )
        self.db_duration = Histogram(
            "queen_db_query_duration_seconds",
            "Database calls by named statement, pool wait included.",
            ["query"],
            buckets=_DB_BUCKETS,
        )
        self.db_errors = Counter(
            "queen_db_query_errors_total", "Database calls that raised, by statement.", ["query"]
        )
        self.cleanup_deleted = Counter(
            "queen_retention_deleted_messages_total",
            "Messages deleted by the background services, by kind (retention, "
            "completed_retention, max_wait_time_eviction).",
            ["type"],
        )
        self.partitions_deleted = Counter(
            "queen_retention_deleted_partitions_total", "Idle empty partitions deleted."
        )
        self.service_runs = Counter(
            "queen_background_runs_total",
            "Turns of the background services by outcome (ran, failed; locked and not_due "
            "turns of other processes are not counted).",
            ["service", "status"],
        )
        self.service_duration = Histogram(
            "queen_background_run_duration_seconds",
            "Duration of background service runs.",
            ["service"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900),
        )
        self.service_last_success = Gauge(
            "queen_background_last_success_timestamp_seconds",
            "Unix time of the last successful run of each background service.",
            ["service"],
            multiprocess_mode="max",
        )
        # Per-process state, summed over live processes.
        self.processes = Gauge(
            "queen_worker_processes", "Live worker processes.", multiprocess_mode="livesum"
        )
        self.pool_max = Gauge(
            "queen_db_pool_max_connections",
            "Connection budget of the pools.",
            multiprocess_mode="livesum",
        )
        self.pool_connections = Gauge(
            "queen_db_pool_connections",
            "Pooled connections by state (open, idle, in_use).",
            ["state"],
            multiprocess_mode="livesum",
        )
        self.pool_waiting = Gauge(
            "queen_db_pool_waiting_requests",
            "Callers waiting for a pooled connection.",
            multiprocess_mode="livesum",
        )
        self.registry_gauge = Gauge(
            "queen_poll_registry",
            "Long-poll registry: intentions (waiting long polls), groups, in_flight groups, "
            "backoff_states, capacity.",
            ["kind"],
            multiprocess_mode="livesum",
        )
        self.listener_connected = Gauge(
            "queen_wakeup_listener_connected",
            "Processes whose LISTEN/NOTIFY connection is up.",
            multiprocess_mode="livesum",
        )
        self.maintenance_applied = Gauge(
            "queen_worker_maintenance_mode",
            "1 while this worker process applies push maintenance mode (refreshed from the "
            "database about once a second), per process.",
            multiprocess_mode="liveall",
        )
        self.poll_worker = Counter(
            "queen_poll_worker_events_total",
            "Poll-worker events: rounds, pops (database calls), delivered, timed_out, "
            "released_leases, errors.",
            ["event"],
        )
        self.poll_wakeups = Counter(
            "queen_poll_worker_wakeups_total", "Poll-worker wake-ups by source.", ["source"]
        )
        self.peer_rejected = Counter(
            "queen_peer_notifications_rejected_total",
            "Peer notifications dropped for a missing or wrong QUEEN_PEER_SECRET, by transport.",
            ["transport"],
        )
        self.listener_events = Counter(
            "queen_wakeup_listener_events_total",
            "LISTEN/NOTIFY listener: reconnects, errors (failures of any kind).",
            ["event"],
        )
        self.start_time = Gauge(
            "queen_worker_start_time_seconds",
            "Start time of each worker process (one series per pid).",
            multiprocess_mode="liveall",
        )


_metrics: PromMetrics | None = None
_metrics_lock = threading.Lock()


def prom() -> PromMetrics:
    """This process's metric objects (created on first use, after the fork)."""
    global _metrics
    with _metrics_lock:
        if _metrics is None:
            _metrics = PromMetrics()
        return _metrics


# -- in-process totals and rates for the JSON /metrics --------------------------------------
class EventRate:
    """A total and the events of the last minute (for a per-second rate)."""

    def __init__(self, window_s: float = 60.0) -> None:
        self.window_s = window_s
        self.total = 0
        self._recent: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        if n <= 0:
            return
        now = time.monotonic()
        with self._lock:
            self.total += n
            self._recent.append((now, n))
            self._trim(now)

    def _trim(self, now: float) -> None:
        while self._recent and now - self._recent[0][0] > self.window_s:
            self._recent.popleft()

    def snapshot(self) -> dict[str, float]:
        now = time.monotonic()
        with self._lock:
            self._trim(now)
            recent = sum(n for _, n in self._recent)
            total = self.total
        return {"total": total, "rate": round(recent / self.window_s, 2), "lastMinute": recent}


class ProcessCounters:
    """Messages of this process, for /metrics (Prometheus has the server-wide view)."""

    def __init__(self) -> None:
        self.pushed = EventRate()
        self.popped = EventRate()
        self.acked = EventRate()
        self.decryption_errors = EventRate()
        self.db_calls = EventRate()
        self.db_errors = 0
        self._db_ms: deque[float] = deque(maxlen=2048)
        self._lock = threading.Lock()

    def db_call(self, elapsed_s: float, failed: bool) -> None:
        self.db_calls.add(1)
        with self._lock:
            self._db_ms.append(elapsed_s * 1000)
            if failed:
                self.db_errors += 1

    def db_snapshot(self) -> dict[str, Any]:
        with self._lock:
            ordered = sorted(self._db_ms)
            errors = self.db_errors

        def pct(p: float) -> float:
            if not ordered:
                return 0.0
            return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2)

        return {
            **self.db_calls.snapshot(),
            "errors": errors,
            "latencyMs": {"p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99)},
        }

    def messages_snapshot(self) -> dict[str, Any]:
        pushed = self.pushed.snapshot()
        return {
            "total": pushed["total"],
            "rate": pushed["rate"],
            "pushed": pushed,
            "popped": self.popped.snapshot(),
            "acked": self.acked.snapshot(),
            "decryptionErrors": self.decryption_errors.snapshot(),
        }


# -- measuring points -------------------------------------------------------------------------
_names: dict[str, str] | None = None


def query_name(sql: str) -> str:
    """The `-- name:` of a statement text from the queries files ("other" if unknown)."""
    global _names
    if _names is None:
        _names = {queries.get(n): n for n in queries.names()}
    return _names.get(sql, "other")


class TimedDatabase(Database):
    """Database whose calls feed queen_db_query_duration_seconds (by statement name)."""

    def __init__(self, config: PoolConfig, counters: ProcessCounters | None = None) -> None:
        super().__init__(config)
        self.counters = counters

    @contextmanager
    def _timed(self, sql: str, name: str | None = None) -> Iterator[None]:
        started = time.perf_counter()
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            elapsed = time.perf_counter() - started
            name = name or query_name(sql)
            metrics = prom()
            metrics.db_duration.labels(name).observe(elapsed)
            if failed:
                metrics.db_errors.labels(name).inc()
            if self.counters is not None:
                self.counters.db_call(elapsed, failed)

    def execute(self, sql: str, params: Params = None) -> int:
        with self._timed(sql):
            return super().execute(sql, params)

    def fetch_one(self, sql: str, params: Params = None) -> tuple[Any, ...] | None:
        with self._timed(sql):
            return super().fetch_one(sql, params)

    def fetch_all(self, sql: str, params: Params = None) -> list[tuple[Any, ...]]:
        with self._timed(sql):
            return super().fetch_all(sql, params)

    @contextmanager
    def transaction(self) -> Iterator[psycopg2.extensions.cursor]:
        with self._timed("", "transaction"), super().transaction() as cur:
            yield cur


def _by_queue(pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for key in pairs:
        counts[key] = counts.get(key, 0) + 1
    return counts


class MeteredQueueStore(QueueStore):
    """QueueStore counting what the database did: pushes, deliveries, acks, by queue."""

    def __init__(
        self,
        db: Database,
        cipher: PayloadCipher | None = None,
        counters: ProcessCounters | None = None,
    ) -> None:
        super().__init__(db, cipher)
        self.counters = counters

    def _pushed(self, pairs: list[tuple[str, str]]) -> None:
        metrics = prom()
        for (queue, status), n in _by_queue(pairs).items():
            metrics.pushed.labels(queue, status).inc(n)
        if self.counters is not None:
            self.counters.pushed.add(sum(1 for _, status in pairs if status == "queued"))

    def push(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = super().push(items)
        self._pushed(
            [
                (str(item.get("queue") or ""), str(result.get("status") or "failed"))
                for item, result in zip(items, results, strict=False)
            ]
        )
        return results

    def pop(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        results = super().pop(requests)
        delivered: list[tuple[str, str]] = [
            (str(m.get("queue") or ""), "")
            for result in results
            for m in result.get("messages") or ()
        ]
        if delivered:
            metrics = prom()
            for (queue, _), n in _by_queue(delivered).items():
                metrics.popped.labels(queue).inc(n)
            if self.counters is not None:
                self.counters.popped.add(len(delivered))
        return results

    def decryption_failed(self, message: dict[str, Any], reason: str) -> None:
        prom().decryption_errors.labels(str(message.get("queue") or "")).inc()
        if self.counters is not None:
            self.counters.decryption_errors.add(1)

    def _acked(self, pairs: list[tuple[str, str]]) -> None:
        metrics = prom()
        for (queue, status), n in _by_queue(pairs).items():
            metrics.acked.labels(queue, status).inc(n)
        if self.counters is not None:
            self.counters.acked.add(sum(1 for _, status in pairs if status != "rejected"))

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

    def transaction(self, operations: list[dict[str, Any]]) -> dict[str, Any]:
        result = super().transaction(operations)
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


class MeteredPollingService(PollingService):
    """PollingService timing every long-poll wait (queen_long_poll_wait_seconds)."""

    def wait(
        self, intention: PollIntention, is_disconnected: Any, watch: Any = None
    ) -> Response | None:
        outcome = "rejected"
        try:
            answer = super().wait(intention, is_disconnected, watch)
            outcome = _wait_outcome(answer)
            return answer
        finally:
            _observe_wait(intention, outcome)


def _wait_outcome(answer: Response | None) -> str:
    if answer is None:
        return "disconnected"
    return "messages" if answer.status == 200 and answer.body else "timeout"


def _observe_wait(intention: PollIntention, outcome: str) -> None:
    waited = time.monotonic() - intention.created_at
    prom().long_poll_wait.labels(outcome).observe(max(0.0, waited))


class ObservedRequestStats(RequestStats):
    """RequestStats that also feeds the HTTP request counter and latency histogram."""

    def record(self, status: int, elapsed_ms: float) -> None:
        super().record(status, elapsed_ms)
        metrics = prom()
        metrics.http_requests.labels(str(status)).inc()
        metrics.http_duration.observe(elapsed_ms / 1000)


def count_buffered(items: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
    """Push results of the HTTP path: count the items the failover buffer took."""
    pairs = [
        (str(item.get("queue") or ""), "buffered")
        for item, result in zip(items, results, strict=False)
        if result.get("status") == "buffered"
    ]
    for (queue, status), n in _by_queue(pairs).items():
        prom().pushed.labels(queue, status).inc(n)


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
    for key, kind in (
        ("retention", "retention"),
        ("completedRetention", "completed_retention"),
        ("eviction", "max_wait_time_eviction"),
    ):
        step = result.get(key)
        if isinstance(step, dict) and step.get("deleted"):
            metrics.cleanup_deleted.labels(kind).inc(int(step["deleted"]))
    if result.get("partitionsDeleted"):
        metrics.partitions_deleted.inc(int(result["partitionsDeleted"]))


# -- per-process sampling -----------------------------------------------------------------------
class Sampler:
    """Copies this process's state into the livesum gauges, every second and at scrape."""

    def __init__(self, runtime: Runtime, interval_s: float = 1.0) -> None:
        self.runtime = runtime
        self.interval_s = interval_s
        self._last_totals: dict[str, int] = {}
        self._last_wakeups: dict[str, int] = {}
        self._last_counts: dict[tuple[int, str], int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        metrics = prom()
        metrics.processes.set(1)
        metrics.start_time.set(runtime.started_at)

    def start(self) -> None:
        threading.Thread(target=self._loop, name="queen-metrics", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with suppress(Exception):  # never let sampling kill the thread
                self.sample()

    def sample(self) -> None:
        rt = self.runtime
        metrics = prom()
        pool = rt.db.pool.stats()
        metrics.pool_max.set(pool["poolSize"])
        metrics.pool_connections.labels("open").set(pool["open"])
        metrics.pool_connections.labels("idle").set(pool["idleConnections"])
        metrics.pool_connections.labels("in_use").set(pool["inUse"])
        metrics.pool_waiting.set(pool["waitingRequests"])
        metrics.listener_connected.set(1 if rt.listener.connected.is_set() else 0)
        metrics.maintenance_applied.set(1 if rt.maintenance.push_on else 0)
        stats: dict[str, Any] = rt.polling.stats()
        registry = stats.get("registry") or {}
        for kind in ("intentions", "groups", "in_flight", "backoff_states", "capacity"):
            metrics.registry_gauge.labels(kind).set(int(registry.get(kind) or 0))
        totals = stats.get("totals") or {}
        with self._lock:
            for event in ("rounds", "pops", "delivered", "timed_out", "released_leases", "errors"):
                value = int(totals.get(event) or 0)
                delta = value - self._last_totals.get(event, 0)
                if delta > 0:
                    metrics.poll_worker.labels(event).inc(delta)
                self._last_totals[event] = value
            for source, value in (totals.get("wakeups") or {}).items():
                delta = int(value) - self._last_wakeups.get(source, 0)
                if delta > 0:
                    metrics.poll_wakeups.labels(source).inc(delta)
                self._last_wakeups[source] = int(value)
            for transport, value in rt.peers.rejected.items():
                self._add(metrics.peer_rejected, transport, value)
            self._add(metrics.listener_events, "reconnects", rt.listener.reconnects)
            self._add(metrics.listener_events, "errors", rt.listener.errors)

    def _add(self, counter: Counter, label: str, total: int) -> None:
        """Bring `counter{label}` up to this process's running `total`."""
        key = (id(counter), label)
        delta = total - self._last_counts.get(key, 0)
        if delta > 0:
            counter.labels(label).inc(delta)
        self._last_counts[key] = total


# -- scrape ---------------------------------------------------------------------------------------
class BacklogCollector:
    """Queue depth and consumer-group lag, computed at scrape time by one statement."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._cache: tuple[float, list[tuple[Any, ...]], int, float] | None = None
        self._lock = threading.Lock()

    def _rows(self) -> tuple[list[tuple[Any, ...]], int, float]:
        with self._lock:
            now = time.monotonic()
            if self._cache is not None and now - self._cache[0] < BACKLOG_CACHE_S:
                return self._cache[1], self._cache[2], self._cache[3]
            started = time.perf_counter()
            with self.db.transaction() as cur:
                cur.execute(queries.get("ops_local_timeout"), (str(BACKLOG_TIMEOUT_MS),))
                cur.execute(queries.get("ops_queue_count"))
                row = cur.fetchone()
                queues = int(row[0]) if row else 0
                cur.execute(queries.get("ops_backlog"))
                rows = [tuple(r) for r in cur.fetchall()]
            elapsed = time.perf_counter() - started
            self._cache = (now, rows, queues, elapsed)
            return rows, queues, elapsed

    def collect(self) -> Iterator[Metric]:
        ok = GaugeMetricFamily(
            "queen_backlog_scrape_success",
            "1 when the scrape-time backlog statement succeeded (else its gauges are absent).",
        )
        try:
            rows, queues, elapsed = self._rows()
        except Exception:
            ok.add_metric([], 0)
            yield ok
            return
        ok.add_metric([], 1)
        yield ok
        duration = GaugeMetricFamily(
            "queen_backlog_scrape_duration_seconds", "Time the backlog statement took."
        )
        duration.add_metric([], elapsed)
        yield duration
        count = GaugeMetricFamily("queen_queues", "Queues.")
        count.add_metric([], queues)
        yield count
        now = time.time()
        partitions = GaugeMetricFamily(
            "queen_queue_partitions", "Partitions per queue.", labels=["queue"]
        )
        depth = GaugeMetricFamily(
            "queen_queue_depth",
            "Messages not yet consumed in queue mode (the count maxSize limits).",
            labels=["queue"],
        )
        oldest = GaugeMetricFamily(
            "queen_queue_oldest_pending_age_seconds",
            "Age of the oldest message queue mode has not consumed (0 when none).",
            labels=["queue"],
        )
        lag = GaugeMetricFamily(
            "queen_consumer_group_lag_messages",
            "Messages beyond a consumer group's cursors, over the partitions it has visited.",
            labels=["queue", "consumer_group"],
        )
        lag_s = GaugeMetricFamily(
            "queen_consumer_group_lag_seconds",
            "Age of the oldest message a consumer group has not consumed (0 when none).",
            labels=["queue", "consumer_group"],
        )
        for queue, group, n_partitions, n_lag, oldest_epoch in rows:
            age = max(0.0, now - float(oldest_epoch)) if oldest_epoch is not None else 0.0
            if group == QUEUE_MODE:
                partitions.add_metric([queue], float(n_partitions))
                depth.add_metric([queue], float(n_lag))
                oldest.add_metric([queue], age)
            else:
                lag.add_metric([queue, group], float(n_lag))
                lag_s.add_metric([queue, group], age)
        yield from (partitions, depth, oldest, lag, lag_s)


class BufferCollector:
    """Failover buffer and maintenance state at scrape time (the buffer files belong to the
    host, so every process would report the same numbers: they are not stored per process)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        try:
            status = self.runtime.buffer.status()
        except Exception:
            return
        events = GaugeMetricFamily(
            "queen_file_buffer_events",
            "Events in the failover buffer files of this host: pending (to replay), failed "
            "(set aside, retried).",
            labels=["state"],
        )
        events.add_metric(["pending"], float(status.get("pending") or 0))
        events.add_metric(["failed"], float(status.get("failed") or 0))
        yield events
        healthy = GaugeMetricFamily(
            "queen_file_buffer_db_healthy", "1 when the buffer replayer last reached the database."
        )
        healthy.add_metric([], 1.0 if status.get("dbHealthy") else 0.0)
        yield healthy
        mode = GaugeMetricFamily(
            "queen_maintenance_mode",
            "1 when a maintenance mode is on (push, pop).",
            labels=["kind"],
        )
        mode.add_metric(["push"], 1.0 if status.get("maintenanceMode") else 0.0)
        mode.add_metric(["pop"], 1.0 if status.get("popMaintenanceMode") else 0.0)
        yield mode


class _DefaultRegistry:
    """The in-memory registry of this process (single-process mode)."""

    def collect(self) -> Iterator[Metric]:
        return iter(REGISTRY.collect())


class Exposition:
    """Renders /metrics/prometheus for the whole server (every worker process)."""

    def __init__(self, runtime: Runtime) -> None:
        self.sampler = Sampler(runtime)
        self.backlog = BacklogCollector(runtime.db)
        self.buffer = BufferCollector(runtime)

    def render(self, accept: str | None) -> tuple[bytes, str]:
        self.sampler.sample()
        registry = CollectorRegistry(auto_describe=False)
        if multiprocess_mode():
            from prometheus_client import multiprocess

            multiprocess.MultiProcessCollector(registry)
        else:
            registry.register(_DefaultRegistry())
        registry.register(self.backlog)
        registry.register(self.buffer)
        encoder, content_type = choose_encoder(accept or "")
        return encoder(registry), content_type


class Instruments:
    """Everything metric-related one Runtime owns."""

    def __init__(self) -> None:
        self.counters = ProcessCounters()
        self.exposition: Exposition | None = None

    def bind(self, runtime: Runtime) -> None:
        self.exposition = Exposition(runtime)

    def start(self) -> None:
        if self.exposition is not None:
            self.exposition.sampler.start()

    def stop(self) -> None:
        if self.exposition is not None:
            self.exposition.sampler.stop()
