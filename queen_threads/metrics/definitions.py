"""The prometheus-client metric objects every worker process writes, and multiprocess mode.

gunicorn runs several worker processes; a scrape reaches one of them. When
`PROMETHEUS_MULTIPROC_DIR` is set (the gunicorn master sets it, see
config/gunicorn.conf.py) every process writes its counters, histograms and gauges to
files in that folder and a scrape merges the files of all processes: counters and
histograms are summed (those of exited workers included, so totals never go back), the
per-process gauges are summed over live processes (`livesum`; the master's `child_exit`
hook removes a dead worker's gauge files) and last-run timestamps take the maximum.
Without the variable (tests, a single process) the ordinary in-memory registry is used.
"""

from __future__ import annotations

import os
import threading

from prometheus_client import Counter, Gauge, Histogram

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


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
        self.push_rejected = Counter(
            "queen_push_rejected_total",
            "Pushed items the database refused, by queue and reason: queue_full (the "
            "queue's maxSize), queue_required, encryption_key_missing, not_stored. HTTP "
            "pushes, transactions (also those rolled back by it) and buffer replays.",
            ["queue", "reason"],
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
        self.conflated = Counter(
            "queen_messages_conflated_total",
            "Messages a conflating consumer group skipped (its pops deliver the newest "
            "message of a partition only), by queue.",
            ["queue"],
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
        self.kv_expired = Counter(
            "queen_kv_expired_total",
            "Expired key/value rows (lock permits included) deleted by the sweeper.",
        )
        self.lock_acquires = Counter(
            "queen_lock_acquires_total",
            "Lock and semaphore acquires by outcome: grant (a free permit), takeover (a "
            "permit whose lifetime had run out), already (the owner's own permit, answered "
            "again), refusal (every permit held).",
            ["outcome"],
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
        # The ephemeral queues of the database, as the eviction job last read them.
        self.ephemeral_messages = Gauge(
            "queen_ephemeral_messages",
            "Messages held by the ephemeral queues' rings (depth).",
            multiprocess_mode="mostrecent",
        )
        self.ephemeral_bytes = Gauge(
            "queen_ephemeral_bytes",
            "Payload bytes held by the ephemeral queues' rings.",
            multiprocess_mode="mostrecent",
        )
        self.ephemeral_dropped = Gauge(
            "queen_ephemeral_dropped",
            "Ephemeral messages dropped (bounds, ttl, retry limit) since the rings were "
            "created; a crash of PostgreSQL starts it again (the rings are UNLOGGED).",
            multiprocess_mode="mostrecent",
        )
        self.ephemeral_in_flight = Gauge(
            "queen_ephemeral_in_flight",
            "Ephemeral messages handed out with explicit ack and not acked yet.",
            multiprocess_mode="mostrecent",
        )
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
        self.stream_polls_waiting = Gauge(
            "queen_stream_polls_waiting",
            "Stream polls waiting for a window (the stream poll registry's intentions).",
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
            "released_leases, errors, timers (empty rounds that armed a due time).",
            ["event"],
        )
        self.stream_delivered = Counter(
            "queen_stream_windows_delivered_total",
            "Stream windows leased to a poll (long poll or timeout 0), redeliveries "
            "included, by stream.",
            ["stream"],
        )
        self.stream_redelivered = Counter(
            "queen_stream_windows_redelivered_total",
            "Stream windows delivered again after their lease expired, by stream.",
            ["stream"],
        )
        self.stream_acked = Counter(
            "queen_stream_windows_acked_total",
            "Stream window acks by stream and outcome: success (the offset moved past "
            "the window), released (success=false: the window is given back).",
            ["stream", "outcome"],
        )
        self.sdk_cycles = Counter(
            "queen_sdk_cycles_total",
            "Cycles of the streaming SDK (/streams/v1/cycle) by outcome: committed, or "
            "refused (409: a lease that is not the caller's, state changed since it was "
            "read, a full sink; nothing written).",
            ["outcome"],
        )
        self.poll_wakeups = Counter(
            "queen_poll_worker_wakeups_total", "Poll-worker wake-ups by source.", ["source"]
        )
        self.peer_rejected = Counter(
            "queen_peer_notifications_rejected_total",
            "Peer notifications dropped for a missing or wrong QUEEN_PEER_SECRET, by transport.",
            ["transport"],
        )
        self.auth_failures = Counter(
            "queen_auth_failures_total",
            "Requests refused by JWT authentication, by kind: missing (no token), invalid, "
            "expired, forbidden (role too low), unavailable (identity provider's keys).",
            ["kind"],
        )
        self.listener_events = Counter(
            "queen_wakeup_listener_events_total",
            "LISTEN/NOTIFY listener: reconnects, errors (failures of any kind).",
            ["event"],
        )
        self.ignored_parameters = Counter(
            "queen_ignored_parameters_total",
            "Query parameters and body fields a route does not know, ignored (http/ignored.py), "
            "by route, kind (query, body) and name.",
            ["route", "kind", "name"],
        )
        self.trace_context_invalid = Counter(
            "queen_trace_context_invalid_total",
            "W3C trace contexts a push carried that were not valid and were ignored (the "
            "message is stored without one), by where they came: header, item.",
            ["source"],
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
