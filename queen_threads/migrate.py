"""Brings a database's `queen` schema up to date.

Versioned migrations (`schema/migrations/NNNN_*.sql`) run once each; stored-function files
(`schema/functions/*.sql`) are re-applied whenever their content changes. Everything runs
under one advisory lock, so workers and instances starting together take turns, and each
file is applied in its own transaction together with its bookkeeping row. The lock is a
session lock, so the DSN must be the direct database (`DATABASE_DIRECT_URL`, else the
pool's), never a transaction pooler.

On a Citus coordinator (the `citus` extension is installed in the database, or
`QUEEN_CITUS=1` asks for it) the same files run, then `schema/citus/*.sql` places the tables
on the cluster (reference and co-located distributed tables; docs/scaling.md, "Citus"). That
step runs on every migrate and leaves what is already placed alone.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from queen_threads import db
from queen_threads.errors import DatabaseUnavailable, MigrationDeferred, MigrationError, QueenError
from queen_threads.paths import CITUS_DIR, FUNCTIONS_DIR, MIGRATIONS_DIR
from queen_threads.settings.parsers import boolean

log = logging.getLogger("queen_threads.migrate")

# Arbitrary constant shared by every queen-threads process: "queenmig" as an int64.
ADVISORY_LOCK_KEY = 0x7175_6565_6E6D_6967


@dataclass(frozen=True)
class SchemaFile:
    version: str
    name: str
    kind: str  # "migration" or "function"
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def schema_files(
    migrations_dir: Path = MIGRATIONS_DIR, functions_dir: Path = FUNCTIONS_DIR
) -> list[SchemaFile]:
    files = [
        SchemaFile(p.stem.split("_", 1)[0], p.stem, "migration", p.read_text("utf-8"))
        for p in sorted(migrations_dir.glob("*.sql"))
    ]
    files += [
        SchemaFile(f"fn:{p.stem}", p.stem, "function", p.read_text("utf-8"))
        for p in sorted(functions_dir.glob("*.sql"))
    ]
    return files


def citus_files(citus_dir: Path = CITUS_DIR) -> list[SchemaFile]:
    """The Citus placement step: run after everything else, on every migrate (idempotent)."""
    return [
        SchemaFile(f"citus:{p.stem}", p.stem, "citus", p.read_text("utf-8"))
        for p in sorted(citus_dir.glob("*.sql"))
    ]


def citus_requested(env: Mapping[str, str] | None = None) -> bool:
    """QUEEN_CITUS (settings/database.py): the database must be a Citus coordinator (the
    extension is created when missing). Unset or false: Citus is used when the extension is
    already there. Read here because every caller of migrate() (serve, migrate, the
    workers' retries) must place the schema the same way."""
    raw = (os.environ if env is None else env).get("QUEEN_CITUS", "")
    try:
        return boolean(raw)
    except ValueError as exc:
        raise MigrationError(f"invalid QUEEN_CITUS: {exc}") from exc


def _on_citus(tx: db.NamedCursor) -> bool:
    if citus_requested():
        tx.execute("create_citus_extension")
        return True
    return tx.row("citus_installed") is not None


def migrate(dsn: str, connect_timeout_s: int = 5) -> list[str]:
    """Apply what is missing or changed; returns the names applied. Idempotent.
    MigrationDeferred when the database cannot be reached (nothing was applied then, or
    what was is committed and the next run goes on from there)."""
    try:
        conn = db.connect_raw(dsn, connect_timeout_s)
    except DatabaseUnavailable as exc:
        raise MigrationDeferred(f"cannot connect to the database: {exc}") from exc
    except QueenError as exc:
        raise MigrationError(f"cannot connect to the database: {exc}") from exc
    applied_now: list[str] = []
    try:
        with conn.cursor() as cur:
            tx = db.NamedCursor(cur)
            tx.execute("advisory_lock", (ADVISORY_LOCK_KEY,))
            try:
                tx.execute("create_migrations_table")
                citus = _on_citus(tx)
                if citus:  # a migration may add a trigger to a distributed table
                    tx.execute("citus_allow_triggers")
                applied = dict(tx.rows("applied_migrations"))
                for f in schema_files():
                    if f.kind == "migration" and f.version in applied:
                        continue
                    if f.kind == "function" and applied.get(f.version) == f.checksum:
                        continue
                    _apply(conn, f, one_by_one=citus)
                    applied_now.append(f.name)
                if citus:
                    for f in citus_files():
                        _apply(conn, f, record=False, one_by_one=True)
            finally:
                tx.execute("advisory_unlock", (ADVISORY_LOCK_KEY,))
    except Exception as exc:
        if isinstance(exc, MigrationError):
            raise
        error = db.translate(exc)
        if isinstance(error, DatabaseUnavailable):
            raise MigrationDeferred(f"migration interrupted: {error}") from exc
        raise MigrationError(f"migration failed: {error}") from exc
    finally:
        conn.close()
    for name in applied_now:
        log.info("applied %s", name)
    return applied_now


_DOLLAR = re.compile(r"\$[A-Za-z_0-9]*\$")


def split_statements(sql: str) -> list[str]:
    """The statements of a schema file, in order (comments kept, empty ones left out).
    Knows comments, quoted strings and identifiers and dollar quoting; not E'' strings'
    backslash escapes (the schema has none)."""
    out: list[str] = []
    start = i = 0
    n = len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c in "'\"":
            j = i + 1
            while j < n and not (sql[j] == c and not sql.startswith(c * 2, j)):
                j += 2 if sql.startswith(c * 2, j) else 1
            i = j + 1
        elif c == "$" and (m := _DOLLAR.match(sql, i)) and not sql[i - 1 : i].isalnum():
            j = sql.find(m.group(0), m.end())
            i = n if j < 0 else j + len(m.group(0))
        elif c == ";":
            out.append(sql[start : i + 1])
            start = i = i + 1
        else:
            i += 1
    out.append(sql[start:])
    return [st for st in out if _has_code(st)]


def _has_code(statement: str) -> bool:
    return any(
        line.strip() and not line.strip().startswith("--") for line in statement.splitlines()
    )


def _apply(
    conn: db.Connection, f: SchemaFile, record: bool = True, one_by_one: bool = False
) -> None:
    """One file in one transaction. `one_by_one` (Citus): a statement per query, as Citus
    sends some DDL on distributed tables (CREATE INDEX, a generated column) to the workers
    as the query's text, which must then hold that statement alone."""
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            for statement in split_statements(f.sql) if one_by_one else [f.sql]:
                cur.execute(statement)  # a schema file itself, not a named statement
            if record:
                db.NamedCursor(cur).execute(
                    "record_migration", (f.version, f.name, f.kind, f.checksum)
                )
        conn.commit()
    except Exception as exc:
        if not conn.closed:
            conn.rollback()
        error = db.translate(exc)
        deferred = isinstance(error, DatabaseUnavailable)
        raise (MigrationDeferred if deferred else MigrationError)(f"{f.name}: {error}") from exc
    finally:
        if not conn.closed:
            conn.autocommit = True
