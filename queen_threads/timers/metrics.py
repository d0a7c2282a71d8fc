"""The timers' Prometheus gauges, computed at scrape time from the database (one
statement, cached a couple of seconds, so every process of every instance reports the same
numbers): pending and due timers, and the last hour's fires and their lateness."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

CACHE_S = 2.0
Stats = Callable[[], dict[str, Any]]

GAUGES = (
    ("pending", "queen_timers_pending", "Timers scheduled and not fired yet."),
    ("due", "queen_timers_due", "Pending timers whose time (or next attempt) has passed."),
    ("deferred", "queen_timers_deferred", "Pending timers waiting after a failed fire "
     "(their queue was full)."),
    ("fired", "queen_timers_fired_last_hour", "Timers fired in the last hour."),
    ("late", "queen_timers_late_last_hour", "Timers fired in the last hour more than 50 ms "
     "after their time."),
    ("lateP50Ms", "queen_timers_lateness_p50_ms", "Median fire lateness of the last hour, ms."),
    ("lateP99Ms", "queen_timers_lateness_p99_ms", "99th percentile fire lateness of the last "
     "hour, ms."),
)  # fmt: skip


class TimersCollector:
    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self._cache: tuple[float, dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def _numbers(self) -> dict[str, Any]:
        with self._lock:
            now = time.monotonic()
            if self._cache is None or now - self._cache[0] >= CACHE_S:
                self._cache = (now, self.stats())
            return self._cache[1]

    def collect(self) -> Iterator[Metric]:
        try:
            numbers = self._numbers()
        except Exception:
            return
        for key, name, doc in GAUGES:
            value = numbers.get(key)
            if isinstance(value, int | float):
                gauge = GaugeMetricFamily(name, doc)
                gauge.add_metric([], float(value))
                yield gauge
