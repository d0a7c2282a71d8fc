"""Renders `GET /metrics/prometheus`: every worker process's metrics plus scrape-time gauges.

Gauges that describe the database (queue depth, consumer-group lag) or the host (failover
buffer files) are not stored per process: the collectors here compute them at scrape time,
through the store (`backlog`) and the buffer (`status`) they are given.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from queen_threads.metrics.counters import ProcessCounters
from queen_threads.metrics.definitions import multiprocess_mode
from queen_threads.metrics.minutes import QueueMinutes
from queen_threads.metrics.sampler import Sampler

QUEUE_MODE = "__QUEUE_MODE__"
BACKLOG_CACHE_S = 2.0
BACKLOG_TIMEOUT_MS = 5000

BacklogRows = list[tuple[Any, ...]]
# (timeout_ms) -> (number of queues, rows: queue, consumer_group, partitions, lag, oldest_epoch)
BacklogSource = Callable[[int], tuple[int, BacklogRows]]
BufferStatus = Callable[[], Mapping[str, Any]]


class BacklogCollector:
    """Queue depth and consumer-group lag, computed at scrape time by one statement."""

    def __init__(self, backlog: BacklogSource) -> None:
        self.backlog = backlog
        self._cache: tuple[float, BacklogRows, int, float] | None = None
        self._lock = threading.Lock()

    def _rows(self) -> tuple[BacklogRows, int, float]:
        with self._lock:
            now = time.monotonic()
            if self._cache is not None and now - self._cache[0] < BACKLOG_CACHE_S:
                return self._cache[1], self._cache[2], self._cache[3]
            started = time.perf_counter()
            queues, rows = self.backlog(BACKLOG_TIMEOUT_MS)
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

    def __init__(self, status: BufferStatus) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        try:
            status = self.status()
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

    def __init__(
        self,
        sampler: Sampler,
        backlog: BacklogSource,
        buffer: BufferStatus,
        collectors: Sequence[Any] = (),
    ) -> None:
        self.sampler = sampler
        self.backlog = BacklogCollector(backlog)
        self.buffer = BufferCollector(buffer)
        # Other rooms' scrape-time collectors (e.g. the timers' gauges), from runtime.py.
        self.collectors = list(collectors)

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
        for collector in self.collectors:
            registry.register(collector)
        encoder, content_type = choose_encoder(accept or "")
        return encoder(registry), content_type


class Instruments:
    """Everything metric-related one Runtime owns: the JSON counters and the analytics
    minutes from the start, the exposition (and its sampler thread) once `bind` gave it
    what it reads."""

    def __init__(self) -> None:
        self.counters = ProcessCounters()
        self.minutes = QueueMinutes()  # per-queue analytics counts until the next flush
        self.exposition: Exposition | None = None

    def bind(self, exposition: Exposition) -> None:
        self.exposition = exposition

    def start(self) -> None:
        if self.exposition is not None:
            self.exposition.sampler.start()

    def stop(self) -> None:
        if self.exposition is not None:
            self.exposition.sampler.stop()
