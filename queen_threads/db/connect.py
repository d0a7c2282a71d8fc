"""Connections: their settings (TCP keepalives, timeouts), gevent cooperation, the
mapping of driver errors onto the project's errors, standalone connections and LISTEN."""

from __future__ import annotations

import logging
import re
import select
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.errors
import psycopg2.extensions

from queen_threads.errors import DatabaseError, DatabaseUnavailable, ValidationError

log = logging.getLogger("queen_threads.db")

CITUS_REMOTE = "while executing command on"  # Citus's context line of a worker's error

Connection = psycopg2.extensions.connection
Cursor = psycopg2.extensions.cursor
Params = Sequence[Any] | dict[str, Any] | None

# SQLSTATE classes that mean "the server or the link is gone / overloaded": retryable 503.
_UNAVAILABLE_CLASSES = ("08", "53", "57")  # connection exception, resources, operator intervention
# Citus cannot (re)open its connection to a worker (SQLSTATE 08006, or XX000 when relayed).
_CITUS_REMOTE_NODE_FAILED = "connection to the remote node"
# A Citus coordinator relays a failure of its connection to a worker node (the node went
# away, restarted, or a backend there ended) as an internal error (XX000) when libpq gave it
# no SQLSTATE: the text is libpq's or Citus's own. Seen while a node was stopped under load
# (tests/citus/test_citus_faults.py) and while shards moved (test_citus_rebalance.py).
_CITUS_LINK_LOST = (
    "failure on connection marked as essential",
    "server closed the connection unexpectedly",
    "connection not open",
    "no connection to the server",
    "could not receive data from server",
    "could not send data to server",
    _CITUS_REMOTE_NODE_FAILED,
    "lost connection to",
    "ssl syscall error",
)
# A statement that reached a shard placement a move had just dropped (citus_rebalance_start:
# the old placement goes once the move has committed): `relation "queen.messages_102008"
# does not exist`, raised on a worker; a write planned against the shard's old metadata
# says `could not find valid entry for shard 102008` (XX000). (Both are what Citus's own
# developers show for a statement racing a shard's removal: citusdata/citus#6029.) The same
# statement finds the new placement again.
_SHARD_RELATION_GONE = re.compile(r'^relation "[^"]+_[0-9]+" does not exist')
_SHARD_ENTRY_GONE = ("could not find valid entry for shard", "could not find any shard placements")

# TCP keepalives on every connection the project opens (pool, LISTEN, background sessions,
# migrations): a link that died without a FIN or RST (a host or NAT that vanished) is
# noticed after idle + interval * count = 25 s of silence, and unacknowledged data gives
# up after TCP_USER_TIMEOUT_MS; without them a half-open connection waits for ever.
# Values the DSN sets itself win. (libpq ignores them on Unix-domain sockets.)
KEEPALIVE_IDLE_S = 10
KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_COUNT = 3
TCP_USER_TIMEOUT_MS = 30000


@dataclass(frozen=True)
class PoolConfig:
    dsn: str
    max_size: int
    acquire_timeout_s: float
    connect_timeout_s: int = 2
    statement_timeout_ms: int = 30000
    lock_timeout_ms: int = 10000
    idle_in_transaction_timeout_ms: int = 30000
    application_name: str = "queen-threads"
    # The DSN leads to a transaction pooler (PgBouncer pool_mode=transaction): the
    # timeouts cannot travel as startup options (refused, or ignored) nor as session
    # settings (they would stay on a server connection other clients share), so every
    # transaction sets them for itself (statements.py).
    transaction_pooled: bool = False
    # A Unix-socket folder that replaces the DSN's host (the same server, cheaper round
    # trips than loopback TCP); "" keeps the DSN's host.
    socket_dir: str = ""


def connection_kwargs(
    dsn: str, connect_timeout_s: int, application_name: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Keyword arguments of `psycopg2.connect(dsn, **kwargs)`: the keepalive defaults (unless
    the DSN sets them), the connect timeout, the application name and `extra`."""
    defaults: dict[str, Any] = {
        "keepalives": 1,
        "keepalives_idle": KEEPALIVE_IDLE_S,
        "keepalives_interval": KEEPALIVE_INTERVAL_S,
        "keepalives_count": KEEPALIVE_COUNT,
    }
    if psycopg2.extensions.libpq_version() >= 120000:  # tcp_user_timeout: libpq 12+
        defaults["tcp_user_timeout"] = TCP_USER_TIMEOUT_MS
    try:
        given = psycopg2.extensions.parse_dsn(dsn)
    except psycopg2.Error:
        given = {}  # malformed: connect() reports it
    kwargs = {k: v for k, v in defaults.items() if k not in given}
    kwargs["connect_timeout"] = connect_timeout_s
    if application_name:
        kwargs["application_name"] = application_name
    kwargs.update(extra)
    return kwargs


def make_cooperative() -> None:
    """Make psycopg2 yield to other greenlets while it waits on the network (gevent);
    connection attempts keep their connect timeout (see green_wait.py)."""
    from queen_threads.db.green_wait import gevent_wait

    psycopg2.extensions.set_wait_callback(gevent_wait)


def translate(exc: BaseException) -> Exception:
    """Map a driver error to the project's own exception."""
    if isinstance(exc, psycopg2.InterfaceError | psycopg2.OperationalError):
        code = getattr(exc, "pgcode", None) or ""
        if isinstance(exc, psycopg2.errors.QueryCanceled):
            return DatabaseUnavailable("database statement timed out")
        if not code or code[:2] in _UNAVAILABLE_CLASSES:
            return DatabaseUnavailable(f"database unavailable: {_first_line(exc)}")
    if isinstance(exc, psycopg2.Error):
        code = getattr(exc, "pgcode", None) or ""
        if citus_link_lost(exc):
            # a Citus node the statement needed went away (Citus gives it no SQLSTATE)
            return DatabaseUnavailable(f"database unavailable: {_first_line(exc)}")
        if shard_metadata_changed(exc):
            return DatabaseUnavailable(f"database busy (a shard moved): {_first_line(exc)}")
        if code.startswith("22") or code in ("23514", "P0002"):
            return ValidationError(_first_line(exc))
        if code[:2] in _UNAVAILABLE_CLASSES or code in ("40001", "40P01", "55P03"):
            return DatabaseUnavailable(f"database busy: {_first_line(exc)}")
        return DatabaseError(_first_line(exc))
    return exc if isinstance(exc, Exception) else RuntimeError(str(exc))


def citus_link_lost(exc: BaseException) -> bool:
    """A Citus coordinator lost its connection to a worker node mid-statement and said so
    as an internal error (XX000): libpq's or Citus's text, not a SQLSTATE. (The same text
    without a code is the driver's own: this process's connection is gone.)"""
    if getattr(exc, "pgcode", None) != "XX000" or not isinstance(exc, psycopg2.Error):
        return False
    line = _first_line(exc).lower()
    return any(text in line for text in _CITUS_LINK_LOST)


def shard_metadata_changed(exc: BaseException) -> bool:
    """A statement raced a Citus shard move: it reached a placement the move had just
    dropped, or metadata that no longer names the shard."""
    code = getattr(exc, "pgcode", None)
    if code == "42P01":
        return raised_on_worker(exc) and _SHARD_RELATION_GONE.match(_first_line(exc)) is not None
    return code == "XX000" and _first_line(exc).startswith(_SHARD_ENTRY_GONE)


def from_worker_link(exc: BaseException) -> bool:
    """The error is about a Citus coordinator's link to a worker (or was raised on a
    worker), relayed over a connection to the coordinator that is itself fine."""
    if not isinstance(exc, psycopg2.Error) or not getattr(exc, "pgcode", None):
        return False
    return (
        citus_link_lost(exc)
        or raised_on_worker(exc)
        or _first_line(exc).startswith(_CITUS_REMOTE_NODE_FAILED)
    )


def raised_on_worker(exc: BaseException) -> bool:
    """The error came from a Citus worker node (its context names the command sent there)."""
    diag = getattr(exc, "diag", None)
    context = (getattr(diag, "context", None) or "") if diag is not None else ""
    return CITUS_REMOTE in context


def _first_line(exc: BaseException) -> str:
    text = (getattr(exc, "pgerror", None) or str(exc) or type(exc).__name__).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line.removeprefix("ERROR:").strip()


def is_connection_error(exc: BaseException) -> bool:
    """The connection itself failed (drop it and the idle ones): not a statement that was
    refused while the link is fine (a timeout, a lock it could not get, a deadlock, a
    serialisation failure: "database busy")."""
    if isinstance(exc, psycopg2.errors.QueryCanceled):
        return False
    if not isinstance(translate(exc), DatabaseUnavailable):
        return False
    if from_worker_link(exc):
        return False  # a worker's link broke, not this one (while a shard moves: often)
    code = getattr(exc, "pgcode", None) or ""
    return not code or code[:2] in _UNAVAILABLE_CLASSES


def connect_raw(
    dsn: str, connect_timeout_s: int = 5, application_name: str | None = None
) -> Connection:
    """A standalone autocommit connection (migrations, LISTEN); errors are translated."""
    try:
        conn = psycopg2.connect(dsn, **connection_kwargs(dsn, connect_timeout_s, application_name))
    except psycopg2.Error as exc:
        raise translate(exc) from exc
    conn.autocommit = True
    return conn


class Listener:
    """A dedicated connection LISTENing on one channel (wake-ups from every process)."""

    def __init__(
        self,
        dsn: str,
        channel: str,
        connect_timeout_s: int = 5,
        application_name: str | None = None,
    ) -> None:
        self.conn = connect_raw(dsn, connect_timeout_s, application_name)
        try:
            with self.conn.cursor() as cur:
                cur.execute(f"LISTEN {psycopg2.extensions.quote_ident(channel, cur)}")
        except psycopg2.Error as exc:
            self.close()
            raise translate(exc) from exc

    def wait(self, timeout_s: float) -> list[str]:
        """Payloads that arrived within `timeout_s`; DatabaseUnavailable if the link broke."""
        try:
            readable, _, _ = select.select([self.conn], [], [], timeout_s)
            if not readable:
                return []
            self.conn.poll()
        except (psycopg2.Error, OSError, ValueError) as exc:
            raise DatabaseUnavailable(f"listener connection lost: {exc}") from exc
        payloads = [n.payload for n in self.conn.notifies]
        self.conn.notifies.clear()
        return payloads

    def close(self) -> None:
        with suppress(Exception):
            self.conn.close()
