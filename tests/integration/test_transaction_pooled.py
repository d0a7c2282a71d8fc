"""The pool behind a transaction pooler (`PoolConfig.transaction_pooled`), against
PostgreSQL itself: the pool's timeouts hold for every named statement and explicit
transaction, yet nothing stays on the connection afterwards, because a pooler hands that
server connection to other clients. Without the flag the timeouts stay the connections'
startup options, as before. (Through a real PgBouncer: tests/acceptance/test_pgbouncer.py.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

from queen_threads.db import Database, PoolConfig
from queen_threads.errors import DatabaseUnavailable
from tests.support.sql import sql_rows

SESSION_SETTINGS = (
    "SELECT current_setting('statement_timeout'), current_setting('lock_timeout'), "
    "current_setting('idle_in_transaction_session_timeout')"
)
SET_MAINTENANCE = {"key": "maintenance_mode", "enabled": False}


def pooled(dsn: str, **timeouts: Any) -> Database:
    """One connection, so every call below runs on the same server session."""
    return Database(
        PoolConfig(dsn=dsn, max_size=1, acquire_timeout_s=5, transaction_pooled=True, **timeouts)
    )


@contextmanager
def row_locked(dsn: str) -> Iterator[None]:
    """Another session holds the row `maintenance_set` updates (for 3 s at most, so that
    a statement without its timeouts ends the test by succeeding instead of hanging)."""
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO queen.system_state (key, value) VALUES ('maintenance_mode', '{}') "
                "ON CONFLICT DO NOTHING"
            )
            conn.commit()
            cur.execute("SET idle_in_transaction_session_timeout = '3s'")
            cur.execute(
                "SELECT 1 FROM queen.system_state WHERE key = 'maintenance_mode' FOR UPDATE"
            )
        yield
    finally:
        conn.close()


def test_a_pooled_statement_waits_for_a_lock_no_longer_than_the_lock_timeout(
    migrated_dsn: str,
) -> None:
    db = pooled(migrated_dsn, lock_timeout_ms=200, statement_timeout_ms=20000)
    try:
        with row_locked(migrated_dsn):
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailable, match="lock timeout"):
                db.value("maintenance_set", SET_MAINTENANCE)
            assert time.monotonic() - started < 2
        # The session itself keeps the server's defaults: nothing was left behind.
        assert sql_rows(db, SESSION_SETTINGS) == [("0", "0", "0")]
        assert db.value("maintenance_set", SET_MAINTENANCE) is False
    finally:
        db.close()


def test_a_pooled_statement_is_cancelled_after_the_statement_timeout(migrated_dsn: str) -> None:
    db = pooled(migrated_dsn, lock_timeout_ms=0, statement_timeout_ms=200)
    try:
        with row_locked(migrated_dsn):
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailable, match="statement timed out"):
                db.value("maintenance_set", SET_MAINTENANCE)
            assert time.monotonic() - started < 2
        assert sql_rows(db, SESSION_SETTINGS) == [("0", "0", "0")]
    finally:
        db.close()


def test_an_explicit_transaction_gets_the_timeouts_with_its_first_statement(
    migrated_dsn: str,
) -> None:
    db = pooled(migrated_dsn, lock_timeout_ms=200, statement_timeout_ms=20000)
    try:
        with (
            row_locked(migrated_dsn),
            pytest.raises(DatabaseUnavailable, match="lock timeout"),
            db.transaction() as tx,
        ):
            assert tx.value("ping") == 1
            tx.value("maintenance_set", SET_MAINTENANCE)
        assert sql_rows(db, SESSION_SETTINGS) == [("0", "0", "0")]
    finally:
        db.close()


def test_an_idle_explicit_transaction_is_ended_by_the_idle_timeout(migrated_dsn: str) -> None:
    db = pooled(migrated_dsn, idle_in_transaction_timeout_ms=100)
    try:
        with pytest.raises(DatabaseUnavailable), db.transaction() as tx:
            assert tx.value("ping") == 1
            time.sleep(0.6)  # the timeout under test: the server ends the idle transaction
            tx.value("ping")
        assert db.value("ping") == 1, "the pool replaced the terminated connection"
    finally:
        db.close()


def test_without_a_pooler_the_timeouts_are_the_connections_startup_options(
    migrated_dsn: str,
) -> None:
    db = Database(
        PoolConfig(
            dsn=migrated_dsn,
            max_size=1,
            acquire_timeout_s=5,
            statement_timeout_ms=30000,
            lock_timeout_ms=10000,
            idle_in_transaction_timeout_ms=20000,
        )
    )
    try:
        assert sql_rows(db, SESSION_SETTINGS) == [("30s", "10s", "20s")]
    finally:
        db.close()
