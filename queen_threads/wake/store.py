"""The wake-ups' statements: this process's interest (wake/interest.py), the other
processes' (wake/targets.py), the notify-only batch (wake/notifier.py), and the newest
wake-interest epoch a write returned (the queue's pushes and acks, the timers' fire).

The only caller of `schema/queries/wake.sql`; each method is one call.
"""

from __future__ import annotations

import threading
from typing import Any

from queen_threads.db import Database


class WakeStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        # The newest wake-interest epoch a push, ack or timer fire returned: the notifier's
        # copy of the other processes' interest must be at least this new (targets.py).
        self.epoch = 0
        self._epoch_lock = threading.Lock()

    def saw_epoch(self, epoch: int) -> None:
        """A write returned this wake-interest epoch (after its commit)."""
        with self._epoch_lock:
            if epoch > self.epoch:
                self.epoch = epoch

    def notify(self, batch: dict[str, Any]) -> int:
        """NOTIFY other processes of wake-up events, after the commits that made them
        (wake/notifier.py); {origin, events}. Returns how many were sent (those another
        process waits for)."""
        return int(self.db.call("wake_batch", batch))

    def want(self, interest: dict[str, Any]) -> int:
        """Say which wake-ups this process's long polls wait for (wake/interest.py);
        {origin, ttlMs, selectors}. Committed when it returns."""
        return int(self.db.call("wake_interest", interest))

    def read(self, origin: str) -> dict[str, Any]:
        """The other processes' live interest, as wake/targets.py keeps it."""
        return dict(self.db.json("wake_interest_read", (origin,)))

    def withdraw(self, origin: str) -> int:
        """This process waits for no wake-up any more."""
        return int(self.db.json("wake_interest_withdraw", (origin,)))
