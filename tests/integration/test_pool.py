from __future__ import annotations

import threading
import time

import pytest

from queen_threads.db import Database, PoolConfig
from queen_threads.embedded import EmbeddedPostgres
from queen_threads.errors import DatabaseUnavailable, ValidationError
from tests.support.sql import sql_value


def test_caller_waits_for_a_busy_connection_then_gets_it(migrated_dsn: str) -> None:
    db = Database(PoolConfig(dsn=migrated_dsn, max_size=1, acquire_timeout_s=5))
    released = threading.Event()
    got: list[int] = []

    def second() -> None:
        got.append(sql_value(db, "SELECT 2"))

    with db.connection():
        t = threading.Thread(target=second)
        t.start()
        t.join(0.2)
        assert t.is_alive(), "the second caller must wait while the only connection is busy"
        assert db.pool.stats()["waitingRequests"] == 1
        released.set()
    t.join(5)
    assert got == [2]
    db.close()


def test_waiting_caller_times_out_with_unavailable(migrated_dsn: str) -> None:
    db = Database(PoolConfig(dsn=migrated_dsn, max_size=1, acquire_timeout_s=0.3))
    with db.connection():
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable, match="no database connection"):
            sql_value(db, "SELECT 1")
        assert 0.25 <= time.monotonic() - started < 2
    assert sql_value(db, "SELECT 1") == 1
    db.close()


def test_driver_errors_become_project_errors(database: Database) -> None:
    with pytest.raises(ValidationError):
        sql_value(database, "SELECT 'not a number'::int")
    assert sql_value(database, "SELECT 1") == 1, "the connection stays usable"


def test_pool_recovers_after_postgres_restart(private_pg: EmbeddedPostgres) -> None:
    db = Database(PoolConfig(dsn=private_pg.dsn, max_size=4, acquire_timeout_s=2))
    conns = [db.pool.acquire() for _ in range(3)]
    for c in conns:
        db.pool.release(c)
    assert db.pool.stats()["idleConnections"] == 3
    private_pg.stop()
    with pytest.raises(DatabaseUnavailable):
        sql_value(db, "SELECT 1")
    private_pg.restart()
    assert sql_value(db, "SELECT 1") == 1, "first request after the restart succeeds"
    assert sql_value(db, "SELECT 1") == 1
    db.close()
