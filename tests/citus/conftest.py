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


@pytest.fixture
def citus_db(citus_cluster: CitusCluster) -> Iterator[str]:
    """A database on every node with the extension and the nodes registered; its DSN on the
    coordinator (no schema yet)."""
    name = f"queen_c_{uuid.uuid4().hex[:10]}"
    dsn = citus_cluster.create_database(name)
    try:
        yield dsn
    finally:
        citus_cluster.drop_database(name)


@pytest.fixture
def citus_dsn(citus_db: str) -> str:
    """The coordinator's DSN of a database migrated by `queen-threads migrate`."""
    migrate.migrate(citus_db)
    return citus_db
