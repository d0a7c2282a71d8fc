"""A greenlet-safe, bounded pool of autocommit connections that notices a dead server."""

from __future__ import annotations

import logging
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg2
import psycopg2.errors
import psycopg2.extensions

from queen_threads.db.connect import (
    Connection,
    PoolConfig,
    connection_kwargs,
    translate,
)
from queen_threads.errors import DatabaseUnavailable

log = logging.getLogger("queen_threads.db")


class Pool:
    """A bounded, lazily-filled connection pool.

    A caller waits (up to `acquire_timeout_s`) when every connection is busy, then gets
    DatabaseUnavailable. Idle connections whose socket became readable (the server closed
    them, e.g. after a PostgreSQL restart) are discarded at checkout, and a connection
    error empties the idle list, so the next requests succeed on fresh connections.

    `reachable` is what the last attempt to use the database said: None before the first
    one, False after a failed connect or a lost connection (`last_error` says why), True
    after a success. Reading it costs no round trip.
    """

    def __init__(self, config: PoolConfig) -> None:
        self.config = config
        self.reachable: bool | None = None
        self.last_error: str | None = None
        self._idle: deque[Connection] = deque()
        self._size = 0
        self._waiting = 0
        self._closed = False
        self._cond = threading.Condition(threading.Lock())

    # -- checkout -------------------------------------------------------------------
    def _take(self) -> Connection | None:
        """Reserve an idle connection or a slot for a new one; None means 'open one'."""
        deadline = time.monotonic() + self.config.acquire_timeout_s
        with self._cond:
            while True:
                if self._closed:
                    raise DatabaseUnavailable("database pool is closed")
                if self._idle:
                    return self._idle.pop()
                if self._size < self.config.max_size:
                    self._size += 1
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise DatabaseUnavailable(
                        "no database connection became free in time", retry_after=1
                    )
                self._waiting += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._waiting -= 1

    def _open(self) -> Connection:
        cfg = self.config
        extra: dict[str, str] = {}
        if not cfg.transaction_pooled:  # else: per transaction (statements.py)
            extra["options"] = (
                f"-c statement_timeout={cfg.statement_timeout_ms} "
                f"-c lock_timeout={cfg.lock_timeout_ms} "
                f"-c idle_in_transaction_session_timeout={cfg.idle_in_transaction_timeout_ms}"
            )
        if cfg.socket_dir:
            extra["host"] = cfg.socket_dir
        conn = psycopg2.connect(
            cfg.dsn,
            **connection_kwargs(cfg.dsn, cfg.connect_timeout_s, cfg.application_name, **extra),
        )
        conn.autocommit = True
        return conn

    def acquire(self) -> Connection:
        while True:
            conn = self._take()
            if conn is None:
                try:
                    opened = self._open()
                except Exception as exc:
                    self._forget()
                    error = translate(exc)
                    self.note_unreachable(str(error))
                    raise error from exc
                self.reachable = True
                return opened
            if _looks_alive(conn):
                return conn
            self._discard(conn)

    def note_unreachable(self, error: str) -> None:
        self.reachable = False
        self.last_error = error

    def release(self, conn: Connection, broken: bool = False) -> None:
        if broken or conn.closed or self._closed:
            self._discard(conn)
            return
        if conn.info.transaction_status != psycopg2.extensions.TRANSACTION_STATUS_IDLE:
            try:
                conn.rollback()
            except Exception:
                self._discard(conn)
                return
        with self._cond:
            self._idle.append(conn)
            if self._waiting:  # (a notify checks its lock's owner: not for nobody)
                self._cond.notify()

    def _forget(self) -> None:
        with self._cond:
            self._size -= 1
            self._cond.notify()

    def _discard(self, conn: Connection) -> None:
        with suppress(Exception):
            conn.close()
        self._forget()

    def flush_idle(self) -> None:
        """Close every idle connection (after a connection error they are likely dead too)."""
        with self._cond:
            stale = list(self._idle)
            self._idle.clear()
            self._size -= len(stale)
            self._cond.notify_all()
        for conn in stale:
            with suppress(Exception):
                conn.close()

    def close(self) -> None:
        with self._cond:
            self._closed = True
        self.flush_idle()

    def stats(self) -> dict[str, int]:
        with self._cond:
            return {
                "poolSize": self.config.max_size,
                "open": self._size,
                "idleConnections": len(self._idle),
                "inUse": self._size - len(self._idle),
                "waitingRequests": self._waiting,
            }


def _original_select() -> Callable[..., tuple[list[Any], list[Any], list[Any]]]:
    """`select.select` as the standard library has it: under gevent's patching the module's
    own is a cooperative one that arms watchers and yields to the hub, which a poll that
    never waits (timeout 0) does not need; gevent hands the original out (public API)."""
    try:
        from gevent.monkey import get_original
    except ImportError:
        return select.select
    original: Callable[..., tuple[list[Any], list[Any], list[Any]]] = get_original(
        "select", "select"
    )
    return original


_select_now = _original_select()


def _looks_alive(conn: Connection) -> bool:
    """An idle connection must have nothing to read; readable means closed by the server."""
    if conn.closed:
        return False
    try:
        readable, _, _ = _select_now([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable
