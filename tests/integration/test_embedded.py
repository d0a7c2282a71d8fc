from __future__ import annotations

import shutil
import tempfile

import psycopg2

from queen_threads.embedded import EmbeddedPostgres


def test_embedded_postgres_keeps_its_data_across_restarts() -> None:
    folder = tempfile.mkdtemp(prefix="queen-test-embedded-")
    try:
        first = EmbeddedPostgres(folder)
        with psycopg2.connect(first.start()) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
        first.stop()
        assert first.running_port() is None
        second = EmbeddedPostgres(folder)
        with psycopg2.connect(second.start()) as conn, conn.cursor() as cur:
            cur.execute("SELECT v FROM kept")
            assert cur.fetchall() == [(42,)]
        # A second start while it runs reuses the running server instead of failing.
        third = EmbeddedPostgres(folder)
        assert third.start() == second.dsn
        assert not third.started_here
        second.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
