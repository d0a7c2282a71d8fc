"""Fixtures for the acceptance tests that drive the real server through the official client.

One server (real `gunicorn -k gevent`, 2 workers) on its own migrated database serves every
`test_client_*` module of the session; tests stay independent by using unique queue,
namespace and consumer-group names. The official client (`queen-mq`) is asyncio-based:
`client_run(body)` runs `await body(client)` on a fresh event loop with a fresh `Queen`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import psycopg2
import psycopg2.extensions
import pytest
from playwright.sync_api import Browser, sync_playwright
from queen import Queen

from tests.client26.run import RUN_TIMEOUT_S, SDIST_TESTS, SdistRun, ensure_installed
from tests.conftest import database_from_template
from tests.support.browser import launch
from tests.support.server import ServerProcess
from tests.support.tokens import SECRET, hs256

T = TypeVar("T")
ClientRun = Callable[..., Any]

# Each test body gets this long before it is cancelled, so a server that never answers
# fails the test instead of hanging the suite.
BODY_TIMEOUT_S = 30


@pytest.fixture(scope="session")
def client_server(pg_admin_dsn: str, template_db: str) -> Iterator[ServerProcess]:
    """A real server on a fresh copy of the migrated template, shared by the session."""
    with database_from_template(pg_admin_dsn, template_db) as dsn, ServerProcess(dsn) as srv:
        yield srv


@pytest.fixture
def server(client_server: ServerProcess) -> ServerProcess:
    """The real server (2 workers, default settings) for a test that only sends requests:
    the session's shared one (a start costs seconds). A test that stops the server, needs
    other settings or an empty database starts its own `ServerProcess`."""
    return client_server


@contextlib.asynccontextmanager
async def open_client(url: str, **options: Any) -> AsyncIterator[Queen]:
    """A `Queen` client (`options`: e.g. bearer_token); restores the SIGINT/SIGTERM
    handlers the client replaces."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    # One attempt: a 5xx must surface at once instead of after the client's 1 s + 2 s
    # retry sleeps (the retry path is client code, not server behaviour).
    client = Queen(url=url, retry_attempts=1, **options)
    try:
        yield client
    finally:
        await client.close()
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.fixture
def client_run(client_server: ServerProcess) -> ClientRun:
    """`client_run(body)` -> the result of `await body(client)`, bounded in time."""

    def run(body: Callable[[Queen], Awaitable[T]], timeout: float = BODY_TIMEOUT_S) -> T:
        async def main() -> T:
            async with open_client(client_server.url) as client:
                return await asyncio.wait_for(body(client), timeout)

        return asyncio.run(main())

    return run


@pytest.fixture
def unique() -> Callable[[str], str]:
    """`unique("orders")` -> a name no other test uses (queues, groups, namespaces)."""
    tag = uuid.uuid4().hex[:10]
    return lambda prefix: f"{prefix}-{tag}"


@pytest.fixture
def admin_conn(migrated_dsn: str) -> Iterator[psycopg2.extensions.connection]:
    """An autocommit connection to the test database, for reading or writing behind the
    server's back."""
    conn = psycopg2.connect(migrated_dsn)
    conn.autocommit = True
    yield conn
    conn.close()


# -- the dashboard's browser tests ----------------------------------------------------------
@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """Debian's Chromium under Playwright, for one test module (tests/support/browser.py)."""
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def module_dsn(pg_admin_dsn: str, template_db: str) -> Iterator[str]:
    """A fresh copy of the migrated template for one test module."""
    with database_from_template(pg_admin_dsn, template_db) as dsn:
        yield dsn


# -- the official client queen-mq 2.6.0's own suite (tests/client26/) ------------------------
CLIENT26_MODULE = "tests/acceptance/test_client26.py"
# The sdist's files that mostly wait, each in a run of its own beside the others: its reads
# cases push 3,600 single messages one at a time, its consume cases wait for their
# consumers, its subscription cases sleep about 10 s each. Measured on 2026-11-27 (2 cores,
# loaded): reads 84 s, consume 50 s, subscription 48 s, the other files 68 s; in two runs
# (reads + subscription, the rest) 229 and 215 s the same morning under more load. They
# name queues no other file names.
ALONE = ("test_reads.py", "test_consume.py", "test_subscription.py")
ENCRYPTION_KEY = "ab" * 32


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The 2.6.0 suite runs in the background from the session's first test on (it waits
    on its server far more than it computes); its per-file verdicts come last, when it has
    long finished, instead of blocking the session while it runs."""
    items.sort(key=lambda item: item.nodeid.startswith(CLIENT26_MODULE))


def _xdist_worker() -> str | None:
    """This session's pytest-xdist worker (gw0, gw1, ...); None without workers."""
    return os.environ.get("PYTEST_XDIST_WORKER")


@pytest.fixture(scope="session")
def client26_runs(
    request: pytest.FixtureRequest,
    pg_admin_dsn: str,
    template_db: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[SdistRun]]:
    """The sdist's tests against two real servers, each on its own database: every file
    against the default server (with an encryption key, as its queue tests configure
    encrypted queues), in runs side by side (each file of ALONE, and the rest), and test_auth.py
    again against one with JWT on (HS256), since its cases gate themselves on JWT_SECRET.

    Under pytest-xdist one worker (gw0) runs them, in a folder of the whole run (the parent
    of the workers' temporary folders), and keeps its servers until they end; the worker
    that gets test_client26.py reads their results from there."""
    worker = _xdist_worker()
    base = tmp_path_factory.getbasetemp()
    workdir = (base.parent if worker else base) / "client26"
    labels = ("default", *(f.removesuffix(".py") for f in ALONE), "jwt")
    if worker not in (None, "gw0"):
        yield [SdistRun(label, "", [], workdir) for label in labels]
        return
    ensure_installed()
    workdir.mkdir(exist_ok=True)
    with contextlib.ExitStack() as stack:
        plain_dsn = stack.enter_context(database_from_template(pg_admin_dsn, template_db))
        jwt_dsn = stack.enter_context(database_from_template(pg_admin_dsn, template_db))
        plain = stack.enter_context(ServerProcess(plain_dsn, QUEEN_ENCRYPTION_KEY=ENCRYPTION_KEY))
        secured = stack.enter_context(
            ServerProcess(jwt_dsn, JWT_ENABLED="true", JWT_ALGORITHM="HS256", JWT_SECRET=SECRET)
        )
        rest = sorted(p.name for p in SDIST_TESTS.glob("test_*.py") if p.name not in ALONE)
        runs = [
            SdistRun(labels[0], plain.url, rest, workdir, JWT_SECRET=""),
            *(SdistRun(label, plain.url, [f], workdir, JWT_SECRET="")
              for label, f in zip(labels[1:-1], ALONE, strict=True)),
            SdistRun(labels[-1], secured.url, ["test_auth.py"], workdir, JWT_SECRET=SECRET,
                     QUEEN_TEST_BEARER_TOKEN=hs256("client26", "admin")),
        ]  # fmt: skip
        for run in runs:
            stack.callback(run.stop)
            run.start()
        yield runs
        if worker and not request.session.shouldfail and not request.session.shouldstop:
            for run in runs:  # another worker may be waiting for the results
                with contextlib.suppress(AssertionError):
                    run.wait(RUN_TIMEOUT_S)


@pytest.fixture(scope="session", autouse=True)
def _client26_in_background(request: pytest.FixtureRequest) -> None:
    """Starts the 2.6.0 suite at the session's first test when its verdicts were collected
    (under pytest-xdist: in worker gw0, whichever worker runs the verdicts)."""
    if _xdist_worker() not in (None, "gw0"):
        return
    if any(item.nodeid.startswith(CLIENT26_MODULE) for item in request.session.items):
        request.getfixturevalue("client26_runs")
