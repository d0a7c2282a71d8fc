"""The streaming SDK's observer: its cycles, committed or refused (queen_sdk_cycles_total)."""

from __future__ import annotations

from queen_threads.metrics.definitions import prom


class CycleMetrics:
    """StreamsSdk's observer (`StreamsSdk(observer=...)`)."""

    def cycled(self, outcome: str) -> None:
        prom().sdk_cycles.labels(outcome).inc()
