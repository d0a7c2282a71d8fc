"""Named statements, the one way the code runs SQL, and `Database`: them over the pool.

Connections are autocommit: every stored-function call is its own transaction, so one
HTTP request costs one round trip. `transaction()` gives an explicit BEGIN/COMMIT block.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

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
    is_connection_error,
    translate,
)
from queen_threads.db.pool import Pool

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
            broken = is_connection_error(exc) or conn.closed != 0
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
