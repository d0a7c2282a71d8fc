"""The Citus tier: queen-threads on a local Citus cluster (coordinator + 2 workers, each its
own PostgreSQL 15 cluster and port; tests/support/citus.py).

It runs when the Citus extension is installed for the system's PostgreSQL 15
(`../shared/citus/install`; CI runs it first). Otherwise its tests are not collected and the
run prints one line saying so and why: never a silent skip. The cluster starts only when a
test of this folder runs (a session fixture), so the rest of the suite does not wait for it.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from queen_threads import migrate
from tests.support.citus import CitusCluster, unavailable

REASON = unavailable()


def pytest_ignore_collect(collection_path, config):  # type: ignore[no-untyped-def]
    """Without Citus the tier is left out (tests/conftest.py prints the line that says so)."""
    if REASON is not None and collection_path.name != "conftest.py":
        return True
    return None


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[CitusCluster]:
    folder = tempfile.mkdtemp(prefix="queen-test-citus-")
    cluster = CitusCluster(folder)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def _database(cluster: CitusCluster) -> Iterator[str]:
    name = f"queen_c_{uuid.uuid4().hex[:10]}"
    dsn = cluster.create_database(name)
    try:
        yield dsn
    finally:
        cluster.drop_database(name)


@pytest.fixture
def citus_db(citus_cluster: CitusCluster) -> Iterator[str]:
    """A database on every node with the extension and the nodes registered; its DSN on the
    coordinator (no schema yet)."""
    with _database(citus_cluster) as dsn:
        yield dsn


@pytest.fixture(scope="module")
def citus_dsn(citus_cluster: CitusCluster) -> Iterator[str]:
    """The coordinator's DSN of a database migrated by `queen-threads migrate`, shared by the
    module (a database on three nodes costs seconds): tests use their own queue names."""
    with _database(citus_cluster) as dsn:
        migrate.migrate(dsn)
        yield dsn
