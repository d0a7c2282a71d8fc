"""The once-a-second sampler: copies this process's state into the per-process gauges.

What it reads of the process (pool, poll workers, listener, maintenance switch, peers) is
handed to it; the Protocols below say what each must offer.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from contextlib import suppress
from typing import Any, Protocol

from prometheus_client import Counter

from queen_threads.metrics.definitions import prom

_POLL_EVENTS = ("rounds", "pops", "delivered", "timed_out", "released_leases", "errors", "timers")
_REGISTRY_KINDS = ("intentions", "groups", "in_flight", "backoff_states", "capacity")


class HasStats(Protocol):
    """The connection pool (`stats()`: poolSize, open, idleConnections, inUse,
    waitingRequests) and the polling services, pops' and streams' (`stats()`: registry,
    totals)."""

    def stats(self) -> Mapping[str, Any]: ...


class ListenerState(Protocol):
    """The LISTEN/NOTIFY listener of this process."""

    @property
    def connected(self) -> threading.Event: ...
    @property
    def reconnects(self) -> int: ...
    @property
    def errors(self) -> int: ...


class MaintenanceState(Protocol):
    @property
    def push_on(self) -> bool: ...


class PeerState(Protocol):
    @property
    def rejected(self) -> Mapping[str, int]: ...


class Sampler:
    """Copies this process's state into the livesum gauges, every second and at scrape."""

    def __init__(
        self,
        started_at: float,
        pool: HasStats,
        polling: HasStats,
        listener: ListenerState,
        maintenance: MaintenanceState,
        peers: PeerState,
        interval_s: float = 1.0,
        streams: HasStats | None = None,
    ) -> None:
        self.pool = pool
        self.polling = polling
        self.streams = streams
        self.listener = listener
        self.maintenance = maintenance
        self.peers = peers
        self.interval_s = interval_s
        self._last_counts: dict[tuple[int, str], int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        metrics = prom()
        metrics.processes.set(1)
        metrics.start_time.set(started_at)

    def start(self) -> None:
        threading.Thread(target=self._loop, name="queen-metrics", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with suppress(Exception):  # never let sampling kill the thread
                self.sample()

    def sample(self) -> None:
        metrics = prom()
        pool = self.pool.stats()
        metrics.pool_max.set(pool["poolSize"])
        metrics.pool_connections.labels("open").set(pool["open"])
        metrics.pool_connections.labels("idle").set(pool["idleConnections"])
        metrics.pool_connections.labels("in_use").set(pool["inUse"])
        metrics.pool_waiting.set(pool["waitingRequests"])
        metrics.listener_connected.set(1 if self.listener.connected.is_set() else 0)
        metrics.maintenance_applied.set(1 if self.maintenance.push_on else 0)
        stats = self.polling.stats()
        registry = stats.get("registry") or {}
        for kind in _REGISTRY_KINDS:
            metrics.registry_gauge.labels(kind).set(int(registry.get(kind) or 0))
        if self.streams is not None:
            waiting = (self.streams.stats().get("registry") or {}).get("intentions")
            metrics.stream_polls_waiting.set(int(waiting or 0))
        totals = stats.get("totals") or {}
        with self._lock:
            for event in _POLL_EVENTS:
                self._add(metrics.poll_worker, event, int(totals.get(event) or 0))
            for source, value in (totals.get("wakeups") or {}).items():
                self._add(metrics.poll_wakeups, source, int(value))
            for transport, value in self.peers.rejected.items():
                self._add(metrics.peer_rejected, transport, value)
            self._add(metrics.listener_events, "reconnects", self.listener.reconnects)
            self._add(metrics.listener_events, "errors", self.listener.errors)

    def _add(self, counter: Counter, label: str, total: int) -> None:
        """Bring `counter{label}` up to this process's running `total`."""
        key = (id(counter), label)
        delta = total - self._last_counts.get(key, 0)
        if delta > 0:
            counter.labels(label).inc(delta)
        self._last_counts[key] = total
