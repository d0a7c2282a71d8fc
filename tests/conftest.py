"""The PostgreSQL fixture shared by every tier.

The server comes from `DATABASE_URL` or the libpq `PG*` variables when set; otherwise a
throwaway embedded PostgreSQL (the same code `queen-threads serve` uses) is started for
the session. A template database is migrated once per session and every test that needs a
database gets a fresh `CREATE DATABASE ... TEMPLATE` copy.

Under pytest-xdist (`scripts/test` runs `-n auto`, docs/testing.md) every worker is a session
of its own: its own embedded server (when none is configured), its own template and its own
uniquely named copies, so workers never share a database. A test marked `serial` (one that
measures latencies) runs while no other worker runs a test.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import falcon.testing
import psycopg2
import psycopg2.extensions
import pytest

from queen_threads import migrate
from queen_threads.app import create_app
from queen_threads.db import Database, PoolConfig
from queen_threads.embedded import EmbeddedPostgres
from queen_threads.runtime import Runtime
from queen_threads.settings import load_settings
from tests.support import citus

# `QUEEN_TEST_CITUS=1`: the session's PostgreSQL is a local Citus cluster (coordinator + 2
# workers, tests/support/citus.py) instead of one PostgreSQL: every database fixture below
# (the template, its copies, `fresh_db`) and every server on them use the coordinator, so the
# same test modules run on both placements (docs/testing.md, "The Citus tier").
CITUS = os.environ.get("QUEEN_TEST_CITUS", "") not in ("", "0")
# The session's Citus clusters by the coordinator's admin DSN (a database is created on
# every node of its cluster).
_CITUS_CLUSTERS: dict[str, citus.CitusCluster] = {}


def _configured_admin_dsn() -> str | None:
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    if os.environ.get("PGHOST"):
        return ""  # libpq reads PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE itself
    return None


def _with_db(dsn: str, dbname: str) -> str:
    return psycopg2.extensions.make_dsn(dsn, dbname=dbname)


def _admin(dsn: str) -> psycopg2.extensions.connection:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    return conn


# The session's own embedded cluster is deleted when the session ends: surviving an operating
# system crash is not what it is for. Without these, every test pays for fsyncs (DROP DATABASE
# alone waits ~0.4 s for its checkpoint). A crash of PostgreSQL itself still recovers from WAL.
THROWAWAY_CLUSTER_SETTINGS = {
    "fsync": "off",
    "full_page_writes": "off",
    "synchronous_commit": "off",
}


def _throwaway_cluster(dsn: str) -> None:
    conn = _admin(dsn)
    try:
        with conn.cursor() as cur:
            for name, value in THROWAWAY_CLUSTER_SETTINGS.items():
                cur.execute(f"ALTER SYSTEM SET {name} = {value}")
            cur.execute("SELECT pg_reload_conf()")
    finally:
        conn.close()


@pytest.fixture(scope="session")
def pg_admin_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if CITUS:
        yield from _citus_admin_dsn()
        return
    configured = _configured_admin_dsn()
    if configured is not None:
        yield configured
        return
    # Outside pytest's own temp folders: a concurrent pytest session prunes those.
    folder = tempfile.mkdtemp(prefix="queen-test-pg-")
    server = EmbeddedPostgres(folder)
    dsn = server.start()
    try:
        _throwaway_cluster(dsn)
        yield dsn
    finally:
        server.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)


def _citus_admin_dsn() -> Iterator[str]:
    """A local Citus cluster for the session (QUEEN_TEST_CITUS=1); the coordinator's DSN."""
    reason = citus.unavailable()
    if reason is not None:
        pytest.exit(f"QUEEN_TEST_CITUS=1 but the Citus tier cannot run: {reason}", returncode=3)
    folder = tempfile.mkdtemp(prefix="queen-test-citus-")
    cluster = citus.CitusCluster(folder)
    try:
        dsn = cluster.start()
        _CITUS_CLUSTERS[dsn] = cluster
        yield dsn
    finally:
        _CITUS_CLUSTERS.pop(cluster.dsn(), None)
        cluster.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)


def _copy_strategy(cur: psycopg2.extensions.cursor) -> str:
    """FILE_COPY when the cluster does not fsync (5x faster for our small template than
    WAL_LOG there); WAL_LOG, PostgreSQL's default, otherwise (FILE_COPY's checkpoints would
    cost more than its copy saves)."""
    cur.execute("SHOW fsync")
    row = cur.fetchone()
    return "FILE_COPY" if row and row[0] == "off" else "WAL_LOG"


@contextmanager
def temporary_database(admin_dsn: str, template: str | None = None) -> Iterator[str]:
    """A new database (a copy of `template` if given), dropped afterwards; its name."""
    name = f"queen_t_{uuid.uuid4().hex[:12]}"
    cluster = _CITUS_CLUSTERS.get(admin_dsn)
    if cluster is not None:
        if template:
            cluster.copy_database(template, name)
        else:
            cluster.create_database(name)
        try:
            yield name
        finally:
            cluster.drop_database(name)
        return
    conn = _admin(admin_dsn)
    with conn.cursor() as cur:
        copy = f' TEMPLATE "{template}" STRATEGY {_copy_strategy(cur)}' if template else ""
        cur.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield name
    finally:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()


@contextmanager
def database_from_template(admin_dsn: str, template: str) -> Iterator[str]:
    """A fresh copy of the migrated template database (dropped afterwards); its DSN."""
    with temporary_database(admin_dsn, template) as name:
        yield _with_db(admin_dsn, name)


@pytest.fixture(scope="session")
def template_db(pg_admin_dsn: str) -> Iterator[str]:
    with temporary_database(pg_admin_dsn) as name:
        migrate.migrate(_with_db(pg_admin_dsn, name))
        yield name


@pytest.fixture
def fresh_db(pg_admin_dsn: str) -> Iterator[str]:
    """An empty database (no schema) and its DSN."""
    with temporary_database(pg_admin_dsn) as name:
        yield _with_db(pg_admin_dsn, name)


@pytest.fixture
def migrated_dsn(pg_admin_dsn: str, template_db: str) -> Iterator[str]:
    """DSN of a fresh copy of the migrated template database."""
    with database_from_template(pg_admin_dsn, template_db) as dsn:
        yield dsn


@pytest.fixture
def pg_conn(migrated_dsn: str) -> Iterator[psycopg2.extensions.connection]:
    conn = _admin(migrated_dsn)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def database(migrated_dsn: str) -> Iterator[Database]:
    db = Database(PoolConfig(dsn=migrated_dsn, max_size=8, acquire_timeout_s=5))
    try:
        yield db
    finally:
        db.close()


@pytest.fixture
def private_pg() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL of the test's own, which the test may stop and start again."""
    folder = tempfile.mkdtemp(prefix="queen-test-private-pg-")
    server = EmbeddedPostgres(folder)
    server.start()
    try:
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def make_runtime(migrated_dsn: str) -> Iterator[Callable[..., Runtime]]:
    """Build a started Runtime on the test database with settings overrides (env names)."""
    made: list[Runtime] = []

    def make(**env: str) -> Runtime:
        runtime = Runtime(load_settings(env, dotenv_path=None), migrated_dsn)
        runtime.start()
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        runtime.stop()


@pytest.fixture
def api(make_runtime: Callable[..., Runtime]) -> falcon.testing.TestClient:
    """The whole HTTP application in-process (falcon's test client) on a fresh database."""
    return falcon.testing.TestClient(create_app(make_runtime()))


# -- serial tests under pytest-xdist ---------------------------------------------------------
@pytest.fixture(scope="session")
def _xdist_locks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path] | None:
    """Two lock files the workers of one run share (the parent of their temporary folders);
    None without workers."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    folder = tmp_path_factory.getbasetemp().parent
    return folder / "serial-turnstile.lock", folder / "serial-room.lock"


@pytest.fixture(autouse=True)
def _serial_when_marked(
    request: pytest.FixtureRequest, _xdist_locks: tuple[Path, Path] | None
) -> Iterator[None]:
    """A readers-writer lock over the workers: every test holds the room shared, a `serial`
    test holds it alone. The turnstile gives a waiting `serial` test priority: while it
    waits, no other test starts (else two workers taking turns could starve it). A
    `lock_free` test only waits for work done elsewhere and takes no part."""
    if _xdist_locks is None or request.node.get_closest_marker("lock_free"):
        yield
        return
    alone = request.node.get_closest_marker("serial") is not None
    with _xdist_locks[0].open("a") as turnstile, _xdist_locks[1].open("a") as room:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(turnstile, fcntl.LOCK_UN)


# -- the Citus tier (tests/citus) ------------------------------------------------------------
def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """One line when the run covers tests/citus and the tier cannot run here (never a silent
    skip). In the main process only: xdist workers report nothing of their own."""
    reason = citus.unavailable()
    if reason is None or hasattr(config, "workerinput"):
        return
    folder = Path(__file__).parent / "citus"
    args = [Path(a.split("::")[0]).resolve() for a in config.args] or [Path.cwd()]
    if any(folder == a or folder.is_relative_to(a) or a.is_relative_to(folder) for a in args):
        terminalreporter.write_line(f"tests/citus: the Citus tier did not run: {reason}")
