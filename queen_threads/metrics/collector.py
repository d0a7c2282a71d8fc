"""This process's side of the analytics: a sample of the process once a second and a flush
of everything counted every METRICS_FLUSH_INTERVAL_S (and at exit) into the per-minute
tables, one round trip (`analytics_flush`, additive upserts, so every process of every
instance adds up). The levels of the queues are sampled by one process per database
(background/metrics_job.py), not here.

Between flushes the counts are live: once a second, when something was counted since the
last time, the process rewrites its row of `queen.metrics_live` with everything it has
not flushed yet (`analytics_live`, one statement a second at most, whatever the request
rate); the flush deletes that row in its own transaction. The charts add the live rows to
the flushed minutes, so every instance's current minute shows within about a second.
"""

from __future__ import annotations

import logging
import os
import resource
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import orjson

from queen_threads.db import Statements
from queen_threads.metrics.counters import RequestStats
from queen_threads.metrics.minutes import ProcessMinutes, ProcessSample, QueueMinutes
from queen_threads.metrics.sampler import HasStats

log = logging.getLogger("queen_threads.metrics")

SAMPLE_INTERVAL_S = 1.0
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident memory of this process now (Linux), else its peak."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass(frozen=True)
class ProcessIdentity:
    """The key of this process's rows (queen.metrics_process_minutes)."""

    hostname: str
    port: int
    worker_id: str


class ProcessReader:
    """Reads a ProcessSample from the pool, the polling service and the request stats."""

    def __init__(self, pool: HasStats, polling: HasStats, requests: RequestStats) -> None:
        self.pool = pool
        self.polling = polling
        self.requests = requests

    def __call__(self) -> ProcessSample:
        pool: Mapping[str, Any] = self.pool.stats()
        registry = self.polling.stats().get("registry") or {}
        return ProcessSample(
            cpu_seconds=time.process_time(),
            rss_bytes=rss_bytes(),
            http_requests=self.requests.total,
            http_active=self.requests.active,
            pool_in_use=int(pool.get("inUse") or 0),
            pool_size=int(pool.get("poolSize") or 0),
            pool_waiting=int(pool.get("waitingRequests") or 0),
            long_polls=int(registry.get("intentions") or 0),
        )


class AnalyticsCollector:
    """Samples this process every second and flushes the counts every `flush_interval_s`.
    A failed flush keeps its rows for the next one."""

    def __init__(
        self,
        db: Statements,
        queues: QueueMinutes,
        identity: ProcessIdentity,
        read: Callable[[], ProcessSample],
        flush_interval_s: float,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.db = db
        self.queues = queues
        self.process = ProcessMinutes()
        self.identity = identity
        self.read = read
        self.flush_interval_s = flush_interval_s
        self.ready = ready
        self.flushes = 0
        self.failures = 0
        self._published = 0  # the version of the counts the live row holds
        self._stop = threading.Event()
        self._flush_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="queen-analytics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and flush what is left (call while the pool is still open)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self.sample()
        self.flush()

    def _loop(self) -> None:
        next_flush = time.monotonic() + self.flush_interval_s
        self.sample()
        while not self._stop.wait(min(SAMPLE_INTERVAL_S, self.flush_interval_s)):
            self.sample()
            if time.monotonic() >= next_flush:
                self.flush()
                next_flush = time.monotonic() + self.flush_interval_s
            else:
                self.publish()

    def publish(self) -> bool:
        """Rewrite this process's live row when something was counted since the last
        time (a flush deleted it, or the rows changed); False when nothing was written."""
        if not self.ready():
            return False
        with self._flush_lock:
            version, rows = self.queues.snapshot()
            if version == self._published:
                return False
            ident = self.identity
            payload = {"hostname": ident.hostname, "port": ident.port,
                       "workerId": ident.worker_id, "queues": rows}  # fmt: skip
            try:
                self.db.execute("analytics_live", (orjson.dumps(payload).decode(),))
            except Exception as exc:
                log.debug("live analytics not written: %s", exc)
                return False
            self._published = version
            return True

    def sample(self) -> None:
        with suppress(Exception):  # never let sampling kill the thread
            self.process.sample(self.read())

    def flush(self) -> bool:
        """Write what was counted; False (rows kept for the next flush) when it failed or
        the schema is not ready yet."""
        if not self.ready():
            return False
        with self._flush_lock:
            queues, minutes = self.queues.drain(), self.process.drain()
            if not queues and not minutes:
                return True
            ident = self.identity
            payload = {
                "queues": queues,
                "process": {
                    "hostname": ident.hostname,
                    "port": ident.port,
                    "workerId": ident.worker_id,
                    "minutes": minutes,
                },
            }
            try:
                self.db.call("analytics_flush", payload)
            except Exception as exc:
                self.queues.restore(queues)
                self.process.restore(minutes)
                self.failures += 1
                log.debug("analytics flush failed (kept for the next one): %s", exc)
                return False
            self.flushes += 1
            version, rows = self.queues.snapshot()  # the row is gone: rewritten if needed
            self._published = version if not rows else -1
            return True

    def stats(self) -> dict[str, Any]:
        return {
            "flushIntervalS": self.flush_interval_s,
            "flushes": self.flushes,
            "failures": self.failures,
        }
