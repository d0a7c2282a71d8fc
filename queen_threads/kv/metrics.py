"""The locks' observer: acquires by outcome (queen_lock_acquires_total)."""

from __future__ import annotations

from queen_threads.metrics.definitions import prom


def count_lock_acquires(counts: dict[str, int]) -> None:
    """Hears the outcome counts of every locks call (KvStore's `on_lock_counts`)."""
    metrics = prom()
    for outcome, n in counts.items():
        metrics.lock_acquires.labels(outcome).inc(int(n))
