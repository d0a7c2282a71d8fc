"""Named statements, the one way the code runs SQL, and `Database`: them over the pool.

Connections are autocommit: every stored-function call is its own transaction, so one
HTTP request costs one round trip. `transaction()` gives an explicit BEGIN/COMMIT block.

Behind a transaction pooler (`PoolConfig.transaction_pooled`) the pool's timeouts cannot
be session settings, so each statement travels after the `transaction_timeouts`
statement in one query string: PostgreSQL runs a multi-statement query string as one
implicit transaction, so its `SET LOCAL`s cover the statement and end with it, still in
one round trip (an explicit transaction sends them with its first statement).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import cache
from typing import Any, Literal, Protocol

import orjson
import psycopg2
import psycopg2.errors
import psycopg2.extensions

from queen_threads.db import queries
from queen_threads.db.connect import (
    Connection,
    Cursor,
    Params,
    PoolConfig,
    from_worker_link,
    is_connection_error,
    translate,
)
from queen_threads.db.pool import Pool

Fetch = Literal["rowcount", "row", "rows"]
FEATURE_NOT_SUPPORTED = "0A000"


def run_named(cur: Cursor, name: str, params: Params, fetch: Fetch, prefix: str = "") -> Any:
    """Run the named statement `name` (schema/queries*.sql) on `cur` with bind parameters,
    after `prefix` (parameterless SQL) in the same query string when given."""
    cur.execute(_prefixed(prefix, name) if prefix else queries.get(name), params)
    if fetch == "rowcount":
        return int(cur.rowcount)
    if fetch == "row":
        row = cur.fetchone()
        return tuple(row) if row is not None else None
    return [tuple(r) for r in cur.fetchall()]


@cache
def _prefixed(prefix: str, name: str) -> str:
    return f"{prefix};\n{queries.get(name)}"


def transaction_timeouts(config: PoolConfig) -> str:
    """`transaction_timeouts` with the pool's values written in: what every pooled
    transaction runs first behind a transaction pooler ("" when the timeouts are the
    connections' startup options). Integers only, so nothing needs quoting."""
    if not config.transaction_pooled:
        return ""
    values = (
        config.statement_timeout_ms,
        config.lock_timeout_ms,
        config.idle_in_transaction_timeout_ms,
    )
    return str(queries.get("transaction_timeouts") % tuple(int(v) for v in values))


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

    def call_and(self, name: str, arg: Any) -> tuple[Any, Any]:
        """A stored function taking JSONB and returning JSON text plus one more value
        (e.g. the wake-interest epoch): both, the first parsed. One round trip."""
        row = self.row(name, (orjson.dumps(arg).decode(),))
        if row is None:
            raise ValueError(f"statement {name!r} returned no row")
        return orjson.loads(row[0]), row[1]


class NamedCursor(Statements):
    """Named statements on one cursor: inside `Database.transaction()` (whose connection
    handling translates driver errors), or on a dedicated connection (`translate=True`).
    `prefix` goes with the first statement only (the transaction's timeouts)."""

    def __init__(self, cur: Cursor, translate: bool = False, prefix: str = "") -> None:
        self.cur = cur
        self._translate = translate
        self._prefix = prefix

    def _run(self, name: str, params: Params, fetch: Fetch) -> Any:
        prefix, self._prefix = self._prefix, ""
        if not self._translate:
            return run_named(self.cur, name, params, fetch, prefix)
        try:
            return run_named(self.cur, name, params, fetch, prefix)
        except psycopg2.Error as exc:
            raise translate(exc) from exc


class StatementObserver(Protocol):
    """Hears every call of a `Database` once it returned or raised: the statement's name
    ("transaction" for a `transaction()` block), how long it took, whether it failed
    (metrics/metered.py's `StatementMetrics` counts them)."""

    def ran(self, name: str, elapsed_s: float, failed: bool) -> None: ...


# A context around one call, by statement name: its OpenTelemetry span
# (telemetry/statements.py) when telemetry is on. A span encloses the call, so calls made
# under it are its children; an observer only hears the call once it is over.
StatementSpan = Callable[[str], AbstractContextManager[None]]


class Database(Statements):
    """Named statements over the pool; the only caller of the driver. `observer` hears
    every call, each inside its span when `spans` is given; without either a call costs
    two tests more than the driver's."""

    def __init__(
        self,
        config: PoolConfig,
        observer: StatementObserver | None = None,
        spans: StatementSpan | None = None,
    ) -> None:
        self.pool = Pool(config)
        self._prefix = transaction_timeouts(config)
        self.observer = observer
        self.spans = spans

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        conn = self.pool.acquire()
        broken = discard = False
        try:
            yield conn
            self.pool.reachable = True
        except psycopg2.Error as exc:
            broken = is_connection_error(exc) or conn.closed != 0
            # A statement a Citus coordinator refused to plan inside a function leaves its
            # session unable to delegate function calls (queen_threads/db/citus.py): that
            # session is not reused. (On PostgreSQL this code is rare: a new connection.)
            # An error raised on a Citus worker leaves that worker's backend in the
            # coordinator session's connection cache; Citus 13.2.2 was seen crashing such a
            # backend (signal 11) at a later COMMIT PREPARED: that session is not reused
            # either, nor one whose link to a worker broke (a node restarted, a shard
            # moved). Only that session: the idle ones and this process's link to the
            # coordinator are fine. (Never on PostgreSQL: these name a worker.)
            discard = exc.pgcode == FEATURE_NOT_SUPPORTED or from_worker_link(exc)
            error = translate(exc)
            if conn.closed:  # the link itself is gone, not just this statement
                self.pool.note_unreachable(str(error))
            else:
                self.pool.reachable = True  # the server answered (with an error)
            if broken:
                self.pool.flush_idle()
            raise error from exc
        finally:
            self.pool.release(conn, broken=broken or discard)

    @contextmanager
    def transaction(self) -> Iterator[NamedCursor]:
        """Several named statements in one transaction (committed unless one raises); the
        observer hears it as one call, "transaction"."""
        with self.spans("transaction") if self.spans is not None else nullcontext():
            started = time.perf_counter()
            failed = True
            try:
                with self.connection() as conn:
                    conn.autocommit = False
                    try:
                        with conn.cursor() as cur:
                            yield NamedCursor(cur, prefix=self._prefix)
                        conn.commit()
                    except BaseException:
                        if not conn.closed:
                            conn.rollback()
                        raise
                    finally:
                        if not conn.closed:
                            conn.autocommit = True
                failed = False
            finally:
                if self.observer is not None:
                    self.observer.ran("transaction", time.perf_counter() - started, failed)

    def _run(self, name: str, params: Params, fetch: Fetch) -> Any:
        if self.spans is not None:
            with self.spans(name):
                return self._observed(name, params, fetch)
        return self._observed(name, params, fetch)

    def _observed(self, name: str, params: Params, fetch: Fetch) -> Any:
        observer = self.observer
        if observer is None:
            return self._execute(name, params, fetch)
        started = time.perf_counter()
        try:
            result = self._execute(name, params, fetch)
        except BaseException:
            observer.ran(name, time.perf_counter() - started, True)
            raise
        observer.ran(name, time.perf_counter() - started, False)
        return result

    def _execute(self, name: str, params: Params, fetch: Fetch) -> Any:
        with self.connection() as conn, conn.cursor() as cur:
            return run_named(cur, name, params, fetch, self._prefix)

    def ping(self) -> bool:
        try:
            return self.value("ping") == 1
        except Exception:
            return False

    def close(self) -> None:
        self.pool.close()
