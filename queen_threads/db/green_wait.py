"""psycopg2's wait callback under gevent, with the connect timeout libpq leaves to us.

With a wait callback installed, psycopg2 opens connections the non-blocking way
(PQconnectStart + PQconnectPoll), and libpq applies `connect_timeout` only to blocking
connects. psycogreen's callback waits on the socket without a deadline, so a server that
accepts TCP but never answers (hung, or behind a proxy whose backend is gone) or a host
that drops packets kept every connection attempt, and the request behind it, waiting for
good: a server started during such an outage never answered anything. This callback ends
a connection attempt after the connection's own `connect_timeout` (libpq semantics: in
seconds, 0 or unset means no limit, values below 2 count as 2); waits of an established
connection (queries) are left as they were.
"""

from __future__ import annotations

import os
import time

import psycopg2
import psycopg2.extensions as ext


def connect_timeout_s(conn: ext.connection) -> float | None:
    """The connection's `connect_timeout` (DSN, else PGCONNECT_TIMEOUT); None: no limit."""
    try:
        raw = ext.parse_dsn(conn.dsn).get("connect_timeout")
    except psycopg2.Error:
        raw = None
    try:
        value = int(raw or os.environ.get("PGCONNECT_TIMEOUT") or 0)
    except ValueError:
        return None
    return float(max(value, 2)) if value > 0 else None


def gevent_wait(conn: ext.connection, timeout: float | None = None) -> None:
    """Wait cooperatively for `conn`; a connection attempt fails after its timeout."""
    from gevent.socket import wait_read, wait_write

    if conn.status != ext.STATUS_SETUP:  # a query: no deadline (the common case, first)
        fileno = conn.fileno()
        while True:
            state = conn.poll()
            if state == ext.POLL_OK:
                return
            if state == ext.POLL_READ:
                wait_read(fileno)
            elif state == ext.POLL_WRITE:
                wait_write(fileno)
            else:
                raise psycopg2.OperationalError(f"bad result from poll: {state!r}")
    limit = connect_timeout_s(conn)
    deadline = time.monotonic() + (limit or 0.0)
    while True:
        state = conn.poll()
        if state == ext.POLL_OK:
            return
        if state not in (ext.POLL_READ, ext.POLL_WRITE):
            raise psycopg2.OperationalError(f"bad result from poll: {state!r}")
        wait = wait_read if state == ext.POLL_READ else wait_write
        if limit is None:
            wait(conn.fileno())
            continue
        expired = psycopg2.OperationalError(f"timeout expired (connect_timeout {limit:g} s)")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise expired
        wait(conn.fileno(), timeout=remaining, timeout_exc=expired)
