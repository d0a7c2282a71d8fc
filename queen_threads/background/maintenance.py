"""The two maintenance switches, shared by every process and instance through the database.

`maintenance_mode` sends every push to the failover file buffer (and pauses its replay);
`pop_maintenance_mode` makes every pop answer 204 at once (a waiting long poll too), and
leaves every message where it is. Both live in `queen.system_state`.

Reading them must not cost a round trip per request. The worker processes of one instance
read them from one shared memory page (background/flags.py): a switch made through any
worker holds in every worker of its instance before the POST is answered. Each process
also reads the database every `refresh_s` (1 s) in the background, so a switch made through
another instance reaches this one within about a second (a GET of the switch reads the
database at once). Every value carries the version the database gave it (`maintenance_set`),
and an older read never overwrites a newer switch.
"""

from __future__ import annotations

import logging
import threading
import time

from queen_threads.background.flags import SharedFlags, maintenance_flags
from queen_threads.db import Database
from queen_threads.errors import QueenError

log = logging.getLogger("queen_threads.maintenance")

PUSH_KEY = "maintenance_mode"
POP_KEY = "pop_maintenance_mode"
PUSH, POP = 0, 1  # their slots in the shared page


class Maintenance:
    """The maintenance flags as this process sees them (its instance's shared page)."""

    def __init__(
        self, db: Database, refresh_s: float = 1.0, flags: SharedFlags | None = None
    ) -> None:
        self.db = db
        self.refresh_s = refresh_s
        self.flags = flags if flags is not None else maintenance_flags()
        self._memory = self.flags.memory  # read per request: one byte, no call
        self.refreshed_at: float | None = None  # time.time() of the last successful read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def push_on(self) -> bool:
        return self._memory[PUSH] == 1

    @property
    def pop_on(self) -> bool:
        return self._memory[POP] == 1

    def refresh(self) -> bool:
        """Read both flags from the database; on failure keep the last known values."""
        try:
            row = self.db.row("maintenance_get")
        except QueenError as exc:
            log.debug("maintenance flags not refreshed: %s", exc)
            return False
        if row is None:
            return False
        push, pop, push_version, pop_version = row
        self.flags.store(PUSH, bool(push), int(push_version))
        self.flags.store(POP, bool(pop), int(pop_version))
        self.refreshed_at = time.time()
        return True

    def set(self, key: str, enabled: bool) -> bool:
        """Store a flag (raises DatabaseUnavailable when the database is down); every
        worker of this instance reads the new value once this returns."""
        if key not in (PUSH_KEY, POP_KEY):
            raise ValueError(f"unknown maintenance flag {key!r}")
        row = self.db.row("maintenance_set", {"key": key, "enabled": enabled})
        assert row is not None  # INSERT ... RETURNING
        value, version = bool(row[0]), int(row[1])
        self.flags.store(PUSH if key == PUSH_KEY else POP, value, version)
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
