"""The gevent wait callback ends a connection attempt after the connection's own
connect_timeout (libpq only applies it to blocking connects)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

from queen_threads.db.green_wait import connect_timeout_s, gevent_wait


def fake(dsn: str) -> Any:
    return SimpleNamespace(dsn=dsn)


def test_connect_timeout_follows_libpq(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    assert connect_timeout_s(fake("host=h connect_timeout=7")) == 7
    assert connect_timeout_s(fake("host=h connect_timeout=1")) == 2  # libpq's minimum
    assert connect_timeout_s(fake("host=h connect_timeout=0")) is None  # no limit
    assert connect_timeout_s(fake("host=h")) is None
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "4")
    assert connect_timeout_s(fake("host=h")) == 4
    assert connect_timeout_s(fake("host=h connect_timeout=3")) == 3


@pytest.fixture
def silent_port() -> Iterator[int]:
    """Completes TCP handshakes, never answers (a hung database)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


def test_a_connect_to_a_silent_server_gives_up_after_its_timeout(silent_port: int) -> None:
    psycopg2.extensions.set_wait_callback(gevent_wait)
    try:
        started = time.monotonic()
        with pytest.raises(psycopg2.OperationalError, match="timeout expired"):
            psycopg2.connect(
                f"host=127.0.0.1 port={silent_port} user=x sslmode=disable", connect_timeout=2
            )
        assert time.monotonic() - started < 10  # without the deadline: for ever
    finally:
        psycopg2.extensions.set_wait_callback(None)
