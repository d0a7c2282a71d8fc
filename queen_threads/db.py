"""The only module that touches psycopg2: a greenlet-safe pool and driver-error mapping.

Connections are autocommit: every stored-function call is its own transaction, so one
HTTP request costs one round trip. `transaction()` gives an explicit BEGIN/COMMIT block.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Literal

import orjson
import psycopg2
import psycopg2.errors
import psycopg2.extensions

from queen_threads import queries
from queen_threads.errors import DatabaseError, DatabaseUnavailable, ValidationError

log = logging.getLogger("queen_threads.db")

Connection = psycopg2.extensions.connection
Cursor = psycopg2.extensions.cursor
Params = Sequence[Any] | dict[str, Any] | None

# SQLSTATE classes that mean "the server or the link is gone / overloaded": retryable 503.
_UNAVAILABLE_CLASSES = ("08", "53", "57")  # connection exception, resources, operator intervention

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
    from queen_threads.green_wait import gevent_wait

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
        if code.startswith("22") or code in ("23514", "P0002"):
            return ValidationError(_first_line(exc))
        if code[:2] in _UNAVAILABLE_CLASSES or code in ("40001", "40P01", "55P03"):
            return DatabaseUnavailable(f"database busy: {_first_line(exc)}")
        return DatabaseError(_first_line(exc))
    return exc if isinstance(exc, Exception) else RuntimeError(str(exc))


def _first_line(exc: BaseException) -> str:
    text = (getattr(exc, "pgerror", None) or str(exc) or type(exc).__name__).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line.removeprefix("ERROR:").strip()


def _is_connection_error(exc: BaseException) -> bool:
    return isinstance(translate(exc), DatabaseUnavailable) and not isinstance(
        exc, psycopg2.errors.QueryCanceled
    )


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
        options = (
            f"-c statement_timeout={cfg.statement_timeout_ms} "
            f"-c lock_timeout={cfg.lock_timeout_ms} "
            f"-c idle_in_transaction_session_timeout={cfg.idle_in_transaction_timeout_ms}"
        )
        conn = psycopg2.connect(
            cfg.dsn,
            **connection_kwargs(
                cfg.dsn, cfg.connect_timeout_s, cfg.application_name, options=options
            ),
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


def _looks_alive(conn: Connection) -> bool:
    """An idle connection must have nothing to read; readable means closed by the server."""
    if conn.closed:
        return False
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


Fetch = Literal["rowcount", "row", "rows"]


def run_named(cur: Cursor, name: str, params: Params, fetch: Fetch) -> Any:
    """Run the named statement `name` (schema/queries*.sql) on `cur` with bind parameters."""
    cur.execute(queries.get(name), params)
    if fetch == "rowcount":
        return int(cur.rowcount)
    if fetch == "row":
        row = cur.fetchone()
        return tuple(row) if row is not None else None
    return [tuple(r) for r in cur.fetchall()]


class Statements:
    """The one way the code runs SQL: a named statement of `schema/queries.sql` or
    `schema/queries/*.sql`, values always as bind parameters. A subclass says where the
    statement runs (`_run`): the pool, one transaction's cursor, a dedicated session."""

    def _run(self, name: str, params: Params, fetch: Fetch) -> Any:
        raise NotImplementedError

    def execute(self, name: str, params: Params = None) -> int:
        """Rows affected."""
        return int(self._run(name, params, "rowcount"))

    def row(self, name: str, params: Params = None) -> tuple[Any, ...] | None:
        result: tuple[Any, ...] | None = self._run(name, params, "row")
        return result

    def rows(self, name: str, params: Params = None) -> list[tuple[Any, ...]]:
        result: list[tuple[Any, ...]] = self._run(name, params, "rows")
        return result

    def value(self, name: str, params: Params = None) -> Any:
        """The first column of the first row (None without a row)."""
        row = self.row(name, params)
        return row[0] if row else None

    def json(self, name: str, params: Params = None) -> Any:
        """A statement returning one JSON text, parsed (None when it returns NULL)."""
        text = self.value(name, params)
        return orjson.loads(text) if text is not None else None

    def call(self, name: str, arg: Any) -> Any:
        """A stored function taking and returning JSONB: one round trip."""
        return self.json(name, (orjson.dumps(arg).decode(),))


class NamedCursor(Statements):
    """Named statements on one cursor: inside `Database.transaction()` (whose connection
    handling translates driver errors), or on a dedicated connection (`translate=True`)."""

    def __init__(self, cur: Cursor, translate: bool = False) -> None:
        self.cur = cur
        self._translate = translate

    def _run(self, name: str, params: Params, fetch: Fetch) -> Any:
        if not self._translate:
            return run_named(self.cur, name, params, fetch)
        try:
            return run_named(self.cur, name, params, fetch)
        except psycopg2.Error as exc:
            raise translate(exc) from exc


class Database(Statements):
    """Named statements over the pool; the only caller of the driver."""

    def __init__(self, config: PoolConfig) -> None:
        self.pool = Pool(config)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        conn = self.pool.acquire()
        broken = False
        try:
            yield conn
            self.pool.reachable = True
        except psycopg2.Error as exc:
            broken = _is_connection_error(exc) or conn.closed != 0
            error = translate(exc)
            if conn.closed:  # the link itself is gone, not just this statement
                self.pool.note_unreachable(str(error))
            else:
                self.pool.reachable = True  # the server answered (with an error)
            if broken:
                self.pool.flush_idle()
            raise error from exc
        finally:
            self.pool.release(conn, broken=broken)

    @contextmanager
    def transaction(self) -> Iterator[NamedCursor]:
        """Several named statements in one transaction (committed unless one raises)."""
        with self.connection() as conn:
            conn.autocommit = False
            try:
                with conn.cursor() as cur:
                    yield NamedCursor(cur)
                conn.commit()
            except BaseException:
                if not conn.closed:
                    conn.rollback()
                raise
            finally:
                if not conn.closed:
                    conn.autocommit = True

    def _run(self, name: str, params: Params, fetch: Fetch) -> Any:
        with self.connection() as conn, conn.cursor() as cur:
            return run_named(cur, name, params, fetch)

    def ping(self) -> bool:
        try:
            return self.value("ping") == 1
        except Exception:
            return False

    def close(self) -> None:
        self.pool.close()


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
