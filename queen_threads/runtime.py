"""Everything one worker process owns: settings, database pool, counters, services.

`Runtime.start()` runs when the app loads in a gunicorn worker (after the fork and the
gevent patching); `Runtime.stop()` runs from gunicorn's `worker_exit` hook.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from queen_threads import __version__, migrate
from queen_threads.db import Database, PoolConfig
from queen_threads.errors import MigrationError
from queen_threads.services.stats import RequestStats
from queen_threads.settings import Settings

log = logging.getLogger("queen_threads.runtime")


def pool_config(settings: Settings, dsn: str) -> PoolConfig:
    return PoolConfig(
        dsn=dsn,
        max_size=settings.workers_pool_size(),
        acquire_timeout_s=settings.db_pool_acquisition_timeout_ms / 1000,
        connect_timeout_s=max(1, settings.db_connection_timeout_ms // 1000),
        statement_timeout_ms=settings.db_statement_timeout_ms,
        lock_timeout_ms=settings.db_lock_timeout_ms,
        idle_in_transaction_timeout_ms=settings.db_idle_timeout_ms,
        application_name=f"queen-threads:{os.getpid()}",
    )


class Runtime:
    """The per-process object graph handed to `create_app`."""

    def __init__(self, settings: Settings, dsn: str) -> None:
        self.settings = settings
        self.dsn = dsn
        self.version = __version__
        self.worker_id = os.getpid()
        self.db = Database(pool_config(settings, dsn))
        self.stats = RequestStats()
        self.started_at = time.time()
        self.schema_ready = threading.Event()
        self._stopping = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._ensure_schema, name="migrate", daemon=True).start()

    def _ensure_schema(self) -> None:
        """Apply migrations; while the database is down keep trying in the background."""
        delay = 0.5
        while not self._stopping.is_set():
            try:
                migrate.migrate(self.dsn)
                self.schema_ready.set()
                return
            except MigrationError as exc:
                log.warning("schema not ready yet: %s", exc)
            self._stopping.wait(delay)
            delay = min(delay * 2, 5.0)

    def stop(self) -> None:
        self._stopping.set()
        self.db.close()
