"""The `metrics` background service: one process per database at a time (an
ExclusiveService, like retention) samples the levels of every queue (depth, queue mode's
oldest unconsumed message, the largest consumer-group lag) into the current minute of the
analytics tables, and deletes their rows older than METRICS_RETENTION_DAYS.

The event counts are not written here: every worker process flushes its own
(metrics/collector.py). The service runs twice per METRICS_FLUSH_INTERVAL_S, so every
minute gets a level sample even when a turn comes late (a minute sampled twice keeps
the larger value).
"""

from __future__ import annotations

import threading
from typing import Any

from queen_threads.background.exclusive import ExclusiveService, ServiceObserver, Session
from queen_threads.settings import Settings

PRUNE_BATCH = 5000  # rows per table and statement


class MetricsJob:
    """One turn: sample the levels, then prune old rows in bounded batches."""

    name = "metrics"

    def __init__(self, retention_days: int, batch_size: int = PRUNE_BATCH) -> None:
        self.retention_days = retention_days
        self.batch_size = batch_size

    def run(self, session: Session) -> dict[str, Any]:
        sampled = session.call("analytics_sample", {})
        pruned = 0
        if self.retention_days > 0:
            while True:
                n = int(
                    session.value(
                        "analytics_prune", {"days": self.retention_days, "limit": self.batch_size}
                    )
                )
                pruned += n
                if n == 0:
                    break
        return {"queues": sampled["queues"], "depth": sampled["depth"], "pruned": pruned}


def metrics_service(
    settings: Settings,
    dsn: str,
    owner: str,
    ready: threading.Event | None = None,
    observer: ServiceObserver | None = None,
) -> ExclusiveService:
    """The metrics service of one worker process (it runs in one process at a time)."""
    return ExclusiveService(
        dsn,
        MetricsJob(settings.metrics_retention_days),
        settings.metrics_flush_interval_s / 2,
        owner=owner,
        ready=ready,
        observer=observer,
    )
