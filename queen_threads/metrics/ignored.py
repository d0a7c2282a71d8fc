"""Counts of the parameters routes ignored (`http/ignored.py` finds them)."""

from __future__ import annotations

import logging
import threading

from queen_threads.metrics.definitions import prom

log = logging.getLogger("queen_threads.http")

# Distinct names counted per route; past it they count as "(other)", so a client that
# sends random names cannot grow the process's memory or the metric's label set.
MAX_NAMES_PER_ROUTE = 64
OTHER = "(other)"


class IgnoredParameters:
    """This process's counts of ignored parameters, per (method and route) and name."""

    def __init__(self, max_names: int = MAX_NAMES_PER_ROUTE) -> None:
        self.max_names = max_names
        self._counts: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def record(self, route: str, kind: str, name: str) -> None:
        label = f"{kind}:{name}"
        with self._lock:
            names = self._counts.setdefault(route, {})
            first = label not in names
            if first and len(names) >= self.max_names:
                label, first = f"{kind}:{OTHER}", False
            names[label] = names.get(label, 0) + 1
        prom().ignored_parameters.labels(route, kind, label.split(":", 1)[1]).inc()
        if first:
            log.info(
                "ignoring unknown %s parameter %r on %s (counted in /metrics)", kind, name, route
            )

    def stats(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {route: dict(names) for route, names in self._counts.items()}
