"""The locks' observer: acquires by outcome (queen_lock_acquires_total)."""

from __future__ import annotations

from queen_threads.metrics.definitions import prom


class LockMetrics:
    """KvStore's observer (`KvStore(observer=...)`)."""

    def acquired(self, counts: dict[str, int]) -> None:
        metrics = prom()
        for outcome, n in counts.items():
            metrics.lock_acquires.labels(outcome).inc(int(n))
