"""Every connection the project opens carries TCP keepalives (a dead link is noticed in
about 25 s) and a TCP user timeout: checked on the real sockets."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import psycopg2.extensions
import pytest

from queen_threads import db
from queen_threads.background.exclusive import session
from queen_threads.db import Connection, Database, Listener, PoolConfig, connect_raw


def tcp_options(conn: Connection) -> dict[str, int]:
    sock = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)  # a dup
    try:
        return {
            "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            "interval": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            "count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            "user_timeout_ms": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        }
    finally:
        sock.close()


EXPECTED = {"keepalive": 1, "idle": 10, "interval": 5, "count": 3, "user_timeout_ms": 30000}


@pytest.fixture
def tcp_dsn(migrated_dsn: str) -> str:
    conn = psycopg2.connect(migrated_dsn)
    try:
        if conn.info.host.startswith("/"):
            pytest.skip("the test database is reached over a Unix socket")
    finally:
        conn.close()
    return migrated_dsn


@pytest.fixture
def pool_db(tcp_dsn: str) -> Iterator[Database]:
    database = Database(PoolConfig(dsn=tcp_dsn, max_size=1, acquire_timeout_s=5))
    yield database
    database.close()


def test_pool_connections_have_keepalives(pool_db: Database) -> None:
    with pool_db.connection() as conn:
        assert tcp_options(conn) == EXPECTED


def test_standalone_listener_and_session_connections_have_keepalives(tcp_dsn: str) -> None:
    raw = connect_raw(tcp_dsn)  # migrations, bench tools
    listener = Listener(tcp_dsn, "queen_wakeup")
    try:
        assert tcp_options(raw) == EXPECTED
        assert tcp_options(listener.conn) == EXPECTED
        with session(tcp_dsn, 1000, 1000) as s:  # background services
            assert tcp_options(s.conn) == EXPECTED
    finally:
        raw.close()
        listener.close()


def test_keepalive_settings_of_the_dsn_win(tcp_dsn: str) -> None:
    dsn = psycopg2.extensions.make_dsn(tcp_dsn, keepalives_idle=42)
    conn = connect_raw(dsn, application_name="queen-keepalive-test")
    try:
        assert tcp_options(conn) == {**EXPECTED, "idle": 42}
    finally:
        conn.close()
    assert db.connection_kwargs(dsn, 3)["connect_timeout"] == 3
    assert "keepalives_idle" not in db.connection_kwargs(dsn, 3)
