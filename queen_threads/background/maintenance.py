"""The two maintenance switches, shared by every process and instance through the database.

`maintenance_mode` sends every push to the failover file buffer (and pauses its replay);
`pop_maintenance_mode` makes every pop answer 204 at once. Both live in
`queen.system_state`. Reading them must not cost a round trip per request, so each worker
process keeps a copy that a background thread refreshes every `refresh_s` (1 s): a switch
made anywhere reaches every process within about a second, and the process that handled
the POST sees it at once.
"""

from __future__ import annotations

import logging
import threading
import time

from queen_threads.db import Database
from queen_threads.errors import QueenError

log = logging.getLogger("queen_threads.maintenance")

PUSH_KEY = "maintenance_mode"
POP_KEY = "pop_maintenance_mode"


class Maintenance:
    """Cached view of the maintenance flags of one worker process."""

    def __init__(self, db: Database, refresh_s: float = 1.0) -> None:
        self.db = db
        self.refresh_s = refresh_s
        self._push = False
        self._pop = False
        self._version = 0  # bumped by set(): a refresh that raced with it is discarded
        self._lock = threading.Lock()
        self.refreshed_at: float | None = None  # time.time() of the last successful read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def push_on(self) -> bool:
        return self._push

    @property
    def pop_on(self) -> bool:
        return self._pop

    def refresh(self) -> bool:
        """Read both flags from the database; on failure keep the last known values."""
        version = self._version
        try:
            row = self.db.row("maintenance_get")
        except QueenError as exc:
            log.debug("maintenance flags not refreshed: %s", exc)
            return False
        if row is None:
            return False
        with self._lock:
            if version == self._version:
                self._push, self._pop = bool(row[0]), bool(row[1])
                self.refreshed_at = time.time()
        return True

    def set(self, key: str, enabled: bool) -> bool:
        """Store a flag (raises DatabaseUnavailable when the database is down)."""
        if key not in (PUSH_KEY, POP_KEY):
            raise ValueError(f"unknown maintenance flag {key!r}")
        value = bool(self.db.value("maintenance_set", {"key": key, "enabled": enabled}))
        with self._lock:
            self._version += 1
            if key == PUSH_KEY:
                self._push = value
            else:
                self._pop = value
        log.warning("%s switched %s", key, "on" if value else "off")
        return value

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="queen-maintenance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self.refresh_s)
