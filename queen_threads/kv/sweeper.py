"""The key/value sweeper: deletes expired rows (lock permits included) in bounded
batches, one process per database at a time (an ExclusiveService, like retention).
Readers never see an expired row whether or not it was swept; the sweeper only keeps
the table from growing."""

from __future__ import annotations

import threading
from typing import Any

from queen_threads.background.exclusive import ExclusiveService, ServiceObserver, Session
from queen_threads.settings import Settings


class KvSweepJob:
    """One turn: batches of at most `batch_size` rows until one comes back short."""

    name = "kv_sweep"

    def __init__(self, batch_size: int, stop: threading.Event | None = None) -> None:
        self.batch_size = batch_size
        self.stop = stop

    def run(self, session: Session) -> dict[str, Any]:
        deleted = batches = 0
        while True:
            n = int(session.value("kv_sweep", {"limit": self.batch_size}))
            deleted += n
            batches += 1
            if n < self.batch_size or (self.stop is not None and self.stop.is_set()):
                return {"deleted": deleted, "kvExpired": deleted, "batches": batches}


def kv_sweep_service(
    settings: Settings,
    dsn: str,
    owner: str,
    ready: threading.Event | None = None,
    observer: ServiceObserver | None = None,
    stop: threading.Event | None = None,
) -> ExclusiveService:
    """The sweeper loop of one worker process (it runs in one process at a time)."""
    return ExclusiveService(
        dsn,
        KvSweepJob(settings.kv_sweep_batch_size, stop),
        settings.kv_sweep_interval_ms / 1000,
        owner=owner,
        ready=ready,
        observer=observer,
    )
