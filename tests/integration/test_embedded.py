from __future__ import annotations

import shutil
import tempfile

import psycopg2

from queen_threads.db import Database, PoolConfig
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


def _over_socket(dsn: str) -> bool:
    """The connection came over a Unix socket (PostgreSQL has no client address then)."""
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT inet_server_addr() IS NULL")
        row = cur.fetchone()
    conn.close()
    return bool(row and row[0])


def test_embedded_postgres_is_reached_over_its_unix_socket_and_tcp() -> None:
    folder = tempfile.mkdtemp(prefix="queen-test-socket-")
    pg = EmbeddedPostgres(folder)
    try:
        dsn = pg.start()
        socket = pg.socket_dsn
        assert socket is not None and _over_socket(socket)
        assert pg.socket_folder is not None and socket.startswith("postgresql://postgres@/")
        assert dsn.startswith("postgresql://postgres@127.0.0.1:") and not _over_socket(dsn)
    finally:
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_the_pool_goes_through_the_socket_folder_it_is_given() -> None:
    folder = tempfile.mkdtemp(prefix="queen-test-pool-socket-")
    pg = EmbeddedPostgres(folder)
    try:
        dsn = pg.start()
        assert pg.socket_folder is not None
        db = Database(
            PoolConfig(dsn=dsn, max_size=1, acquire_timeout_s=2, socket_dir=pg.socket_folder)
        )
        with db.connection() as conn, conn.cursor() as cur:
            cur.execute("SELECT inet_server_addr() IS NULL")
            assert cur.fetchone() == (True,)
        db.close()
    finally:
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_data_folder_too_deep_for_a_socket_path_is_served_over_tcp() -> None:
    base = tempfile.mkdtemp(prefix="queen-test-deep-")
    folder = f"{base}/{'d' * 60}/{'e' * 60}"  # the socket path would pass 107 bytes
    pg = EmbeddedPostgres(folder)
    try:
        dsn = pg.start()
        assert pg.socket_folder is None and pg.socket_dsn is None and not _over_socket(dsn)
    finally:
        pg.stop()
        shutil.rmtree(base, ignore_errors=True)
