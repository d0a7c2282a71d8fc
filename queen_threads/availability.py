"""Whether this process may use the database now: its schema (migrated in the background
at start, retried while PostgreSQL is down) and the pool's last word on reachability.

A service of the runtime: `start` runs the migration loop in a thread, `stop` ends it.
"""

from __future__ import annotations

import logging
import threading

from queen_threads import migrate
from queen_threads.db import Database
from queen_threads.errors import DatabaseUnavailable, MigrationError

log = logging.getLogger("queen_threads.runtime")

UNAVAILABLE_RETRY_S = 2  # Retry-After of a request refused while the database is down
SCHEMA_RETRY_MAX_S = 2.0  # longest pause between migration attempts at start


class Availability:
    """`direct_dsn`: the database for the migrations (a session of its own, never a
    transaction pooler)."""

    def __init__(self, db: Database, direct_dsn: str) -> None:
        self.db = db
        self.direct_dsn = direct_dsn
        self.schema_ready = threading.Event()
        self.schema_error: str | None = None  # why the last migration attempt failed
        self._retry = threading.Event()  # try the migration now, not after the backoff
        self._stopping = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self.ensure_schema, name="migrate", daemon=True).start()

    def stop(self) -> None:
        self._stopping.set()
        self._retry.set()

    def ensure_schema(self) -> None:
        """Apply migrations; while the database is down keep trying in the background
        (every SCHEMA_RETRY_MAX_S at most, so the replay starts soon after it is back).
        A failure is logged as a warning when its reason changes, else at debug level."""
        delay = 0.5
        timeout_s = self.db.pool.config.connect_timeout_s
        while not self._stopping.is_set():
            try:
                migrate.migrate(self.direct_dsn, timeout_s)
                if self.schema_error is not None:
                    log.warning("schema ready; the database answers again")
                self.schema_ready.set()
                self.schema_error = None
                return
            except MigrationError as exc:
                level = logging.DEBUG if str(exc) == self.schema_error else logging.WARNING
                self.schema_error = str(exc)
                log.log(level, "schema not ready yet: %s", exc)
            self._retry.wait(delay)
            self._retry.clear()
            delay = min(delay * 2, SCHEMA_RETRY_MAX_S)

    def schema_ready_now(self, wait_s: float = 1.0) -> bool:
        """True when the schema is ready; otherwise ask the migration loop to try at once
        (the database answers again: no process should wait out its backoff, nor answer
        503 meanwhile) and wait up to `wait_s` for it."""
        if self.schema_ready.is_set():
            return True
        self._retry.set()
        return self.schema_ready.wait(wait_s)

    def require_database(self) -> None:
        """Raise DatabaseUnavailable (503 + Retry-After) when PostgreSQL is known to be
        unreachable, or reachable without its schema. Costs no round trip, except once per
        process before anything used the database (a ping then finds out)."""
        pool = self.db.pool
        if pool.reachable is None:
            self.db.ping()
        if pool.reachable is False:
            raise DatabaseUnavailable(
                pool.last_error or "database unavailable", UNAVAILABLE_RETRY_S
            )
        if self.schema_error is not None and not self.schema_ready_now():
            raise DatabaseUnavailable(
                f"database schema not ready yet: {self.schema_error}", UNAVAILABLE_RETRY_S
            )
