"""Retention of the fire log (`queen.timer_fires`): one process per database prunes the
rows older than TIMERS_FIRED_RETENTION_HOURS, every RETENTION_INTERVAL, in bounded
batches (background/exclusive.py decides which process runs it). Pending timers are not
pruned: a timer is deleted when it fires or is cancelled, and with its queue."""

from __future__ import annotations

import threading
from typing import Any

from queen_threads.background.exclusive import Session


class TimerFiresRetention:
    name = "timers_retention"

    def __init__(self, hours: int, batch_size: int, stop: threading.Event | None = None) -> None:
        self.hours = hours
        self.batch_size = batch_size
        self.stop = stop

    def run(self, session: Session) -> dict[str, Any]:
        deleted = batches = 0
        while True:
            n = int(session.value("timers_prune_fires", (self.hours, self.batch_size)))
            deleted += n
            batches += 1
            if n < self.batch_size or (self.stop is not None and self.stop.is_set()):
                return {"deleted": deleted, "batches": batches}
