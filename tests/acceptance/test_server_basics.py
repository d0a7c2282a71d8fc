from __future__ import annotations

from collections import Counter

import httpx
import psycopg2

from queen_threads import migrate
from queen_threads.embedded import EmbeddedPostgres
from tests.support.server import ServerProcess


def test_health_is_200_with_database_connected(server: ServerProcess) -> None:
    r = httpx.get(f"{server.url}/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "healthy"
    assert body["database"] == "connected"
    assert r.headers["access-control-allow-origin"] == "*"
    assert r.headers["x-request-id"]


def test_unknown_route_is_json_404(server: ServerProcess) -> None:
    r = httpx.get(f"{server.url}/nope/nothing")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == {"error": "Not found: GET /nope/nothing"}


def test_preflight_and_request_id_echo(server: ServerProcess) -> None:
    r = httpx.options(f"{server.url}/api/v1/push")
    assert r.status_code == 204
    assert "POST" in r.headers["access-control-allow-methods"]
    r = httpx.get(f"{server.url}/health", headers={"X-Request-Id": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"


def test_server_stops_cleanly_on_sigterm(migrated_dsn: str) -> None:
    srv = ServerProcess(migrated_dsn, workers=2).start()
    assert srv.stop() == 0
    assert "Traceback" not in srv.logs()


def test_health_503_when_database_stops_then_recovers(private_pg: EmbeddedPostgres) -> None:
    migrate.migrate(private_pg.dsn)
    with ServerProcess(private_pg.dsn, workers=1, DB_POOL_ACQUISITION_TIMEOUT=1000) as srv:
        assert httpx.get(f"{srv.url}/health").status_code == 200
        private_pg.stop()
        r = httpx.get(f"{srv.url}/health", timeout=10)
        assert r.status_code == 503
        assert r.json()["database"] == "disconnected"
        private_pg.restart()
        r = httpx.get(f"{srv.url}/health", timeout=10)
        assert r.status_code == 200, "no server restart needed"


def test_two_instances_starting_together_on_an_empty_database(fresh_db: str) -> None:
    a, b = ServerProcess(fresh_db, workers=2), ServerProcess(fresh_db, workers=2)
    a.spawn()
    b.spawn()
    try:
        a.wait_healthy()
        b.wait_healthy()
        with psycopg2.connect(fresh_db) as conn, conn.cursor() as cur:
            cur.execute("SELECT version, count(*) FROM queen.schema_migrations GROUP BY 1")
            rows = cur.fetchall()
        assert {version for version, _ in rows} == {f.version for f in migrate.schema_files()}
        assert all(n == 1 for _, n in rows)
        for srv in (a, b):
            assert "Traceback" not in srv.logs()
    finally:
        a.stop()
        b.stop()


def listening_sockets(port: int) -> set[str]:
    """Inodes of the sockets in LISTEN state on `port` (Linux /proc/net/tcp and tcp6)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    found.add(inode)
    return found


def test_each_worker_listens_on_its_own_socket_and_takes_connections(
    server: ServerProcess,
) -> None:
    """REUSE_PORT (default on): one SO_REUSEPORT socket per worker, so the kernel hashes
    new connections over the workers. With one shared socket the worker that wakes first
    takes most of a burst of connections (measured: 15 of 16) and keeps them alive."""
    assert len(listening_sockets(server.port)) == 2  # one per worker, not one shared
    clients = [httpx.Client(base_url=server.url) for _ in range(32)]
    try:
        workers = [c.get("/health").json()["worker_id"] for c in clients]
        # the same keep-alive connection stays with its worker
        assert [c.get("/health").json()["worker_id"] for c in clients] == workers
    finally:
        for c in clients:
            c.close()
    assert len(Counter(workers)) == 2, Counter(workers)  # all 32 on one: odds 1 in 2**31
