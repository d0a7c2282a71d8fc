"""(q)'s databases: one PostgreSQL of its own, and in it one database per side (this
checkout's schema, and with --sqlcost-baseline another checkout's), each migrated by its
own checkout's `queen_threads.migrate` and called through its own named statements.

The PostgreSQL is the system's PostgreSQL 15 (the one (z) and the Citus tier use) with
`pg_stat_statements` preloaded, so that every statement a call runs is counted, nested ones
too (`pg_stat_statements.track = all`, set per session: the CPU windows run with `none`).
Without it (no PostgreSQL 15 or no contrib) the embedded PostgreSQL of the server is used
and statements are not counted. Durability is PostgreSQL's default (fsync on), as the
server's embedded PostgreSQL runs: a commit's WAL flush is part of a call's cost.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psycopg2
import psycopg2.extensions

from bench.citus_nodes import PLAIN_SETTINGS, PlainPostgres
from queen_threads import migrate
from queen_threads.db import queries
from queen_threads.embedded import EmbeddedPostgres
from queen_threads.paths import ROOT
from tests.support.citus import PG_BIN, PG_LIB

STATEMENTS_LIBRARY = PG_LIB / "pg_stat_statements.so"
STATS_SETTINGS = {
    **PLAIN_SETTINGS,
    "shared_preload_libraries": "'pg_stat_statements'",
    "pg_stat_statements.track": "none",  # each session asks for `all` when it counts
    "pg_stat_statements.max": "5000",
    "fsync": "on",
    "full_page_writes": "on",
    "shared_buffers": "128MB",
}


class StatsPostgres(PlainPostgres):
    """The system's PostgreSQL 15 with pg_stat_statements (PlainPostgres's start)."""

    NODE = "sqlcost"
    SETTINGS = STATS_SETTINGS


def stats_available() -> str | None:
    """Why statements cannot be counted here, or None."""
    if not (PG_BIN / "postgres").exists():
        return f"no PostgreSQL 15 at {PG_BIN}"
    if not STATEMENTS_LIBRARY.exists():
        return f"no pg_stat_statements for PostgreSQL 15 ({STATEMENTS_LIBRARY})"
    return None


def autocommit(dsn: str) -> psycopg2.extensions.connection:
    conn = psycopg2.connect(dsn, connect_timeout=10)
    conn.autocommit = True
    return conn


def named_statements(checkout: Path) -> dict[str, str]:
    """The named statements of a checkout (schema/queries.sql and schema/queries/*.sql)."""
    files = [checkout / "schema" / "queries.sql"]
    files += sorted((checkout / "schema" / "queries").glob("*.sql"))
    out: dict[str, str] = {}
    for f in files:
        out.update(queries.parse(f.read_text(encoding="utf-8")))
    return out


@dataclass
class Side:
    """One database and the checkout whose schema and named statements it has."""

    name: str
    dsn: str
    statements: dict[str, str]


@dataclass
class Databases:
    """The PostgreSQL of (q) and its sides' databases."""

    keep: bool = False
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="queen-bench-q-")))
    counting: bool = False
    reason: str | None = None  # why statements are not counted
    admin_dsn: str = ""
    postgres: str = ""  # which PostgreSQL, for the report
    _server: StatsPostgres | EmbeddedPostgres | None = None

    def start(self) -> Databases:
        self.folder.chmod(0o755)  # the postgres user (when run as root) reaches its folders
        self.reason = stats_available()
        if self.reason is None:
            pg = StatsPostgres(self.folder / "pg15")
            pg.start()
            self._server = pg
            self.admin_dsn = pg.dsn(pg.NODE)
            self.counting = True
        else:
            embedded = EmbeddedPostgres(self.folder / "embedded")
            self.admin_dsn = embedded.start()
            self._server = embedded
        conn = autocommit(self.admin_dsn)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT version()")
                row = cur.fetchone()
                self.postgres = str(row[0] if row else "").split(" on ")[0]
        finally:
            conn.close()
        return self

    def side(self, name: str, checkout: Path | None) -> Side:
        """A fresh database `name` migrated by `checkout` (None: this one)."""
        dbname = f"sqlcost_{name}"
        conn = autocommit(self.admin_dsn)
        try:
            with conn.cursor() as cur:
                cur.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
                cur.execute(f'CREATE DATABASE "{dbname}"')
        finally:
            conn.close()
        dsn = self.admin_dsn.replace("/postgres?", f"/{dbname}?")
        if checkout is None or checkout.resolve() == ROOT:
            migrate.migrate(dsn)
            statements = named_statements(ROOT)
        else:
            migrate_with(checkout, dsn)
            statements = named_statements(checkout)
        if self.counting:
            conn = autocommit(dsn)
            try:
                with conn.cursor() as cur:
                    cur.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            finally:
                conn.close()
        return Side(name, dsn, statements)

    def stop(self) -> None:
        if self._server is not None:
            with contextlib.suppress(Exception):
                self._server.stop("fast")
        if self.keep:
            print(f"bench: (q) data kept in {self.folder}", flush=True)
        else:
            shutil.rmtree(self.folder, ignore_errors=True)


def migrate_with(checkout: Path, dsn: str) -> None:
    """Migrate `dsn` with another checkout's schema (its own migrate.py, in a process of
    its own, with this virtualenv's packages)."""
    code = "import sys; from queen_threads.migrate import migrate; migrate(sys.argv[1])"
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", code, dsn], cwd=checkout, env=env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"migrating with {checkout} failed: {done.stderr.strip()[-2000:]}")
