"""The real server behind a real PgBouncer in transaction pool mode.

`DATABASE_URL` points at PgBouncer (two server connections for the whole database, fewer
than the server's pooled clients, so it multiplexes), `DATABASE_DIRECT_URL` at
PostgreSQL. Checked through HTTP, the official client and both sides' own views
(PgBouncer's admin console, `pg_stat_activity`, `pg_locks`): the requests work, the pool
really goes through PgBouncer without startup options (which it would refuse), the LISTEN
connections and the background services' advisory-lock sessions go direct, a timer fires
through it and wakes a long poll, a NOTIFY sent through PgBouncer wakes a long poll within
a second, and PgBouncer's server connections keep no session state.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg2
import psycopg2.extensions
import pytest
from queen import Queen

from queen_threads.background.exclusive import lock_key
from queen_threads.db import Database, PoolConfig
from tests.acceptance.conftest import open_client
from tests.acceptance.test_long_poll import Waiter, wait_registered
from tests.integration.test_listener import push_by_sql
from tests.integration.test_retention import World
from tests.support.pgbouncer import PgBouncer
from tests.support.server import ServerProcess

POOL_SIZE = 2  # PgBouncer's server connections for the test database
POOL_CLIENT = re.compile(r"^queen-threads:\d+$")  # application_name of the server's pool
# Only a wake-up answers a long poll within a second: the database is polled every 5 s.
SLOW_POLLING = {"POLL_DB_INTERVAL": "5000", "QUEUE_MAX_POLL_INTERVAL": "10000"}
Conn = psycopg2.extensions.connection


@pytest.fixture(scope="module")
def direct_dsn(pg_admin_dsn: str, template_db: str) -> Iterator[str]:
    from tests.conftest import database_from_template

    with database_from_template(pg_admin_dsn, template_db) as dsn:
        yield dsn


@pytest.fixture(scope="module")
def dbname(direct_dsn: str) -> str:
    return str(psycopg2.extensions.parse_dsn(direct_dsn)["dbname"])


@pytest.fixture(scope="module")
def bouncer(pg_admin_dsn: str) -> Iterator[PgBouncer]:
    with PgBouncer(pg_admin_dsn, pool_size=POOL_SIZE) as b:
        yield b


@pytest.fixture(scope="module")
def pooled_server(bouncer: PgBouncer, direct_dsn: str, dbname: str) -> Iterator[ServerProcess]:
    with ServerProcess(
        bouncer.dsn(dbname),
        workers=2,
        DATABASE_DIRECT_URL=direct_dsn,
        DB_POOL_SIZE="8",  # 4 per worker process, against PgBouncer's 2
        RETENTION_INTERVAL="500",
        **SLOW_POLLING,
    ) as srv:
        yield srv


def connect(dsn: str, autocommit: bool = True) -> Conn:
    conn = psycopg2.connect(dsn)
    conn.autocommit = autocommit
    return conn


@pytest.fixture
def direct(direct_dsn: str) -> Iterator[Conn]:
    conn = connect(direct_dsn)
    yield conn
    conn.close()


def rows(conn: Conn, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def server_pids(bouncer: PgBouncer, dbname: str) -> set[int]:
    """Backend pids of PgBouncer's server connections to the test database."""
    return {s["remote_pid"] for s in bouncer.show("SERVERS") if s["database"] == dbname}


def pool_clients(bouncer: PgBouncer, dbname: str) -> list[dict[str, Any]]:
    return [
        c
        for c in bouncer.show("CLIENTS")
        if c["database"] == dbname and POOL_CLIENT.match(c["application_name"] or "")
    ]


def backends(conn: Conn, where: str) -> set[int]:
    """pids of the test database's backends matching `where` (SQL over pg_stat_activity)."""
    sql = f"SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND {where}"
    return {pid for (pid,) in rows(conn, sql)}


def wait_until(what: str, check: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def test_push_pop_and_ack_through_the_official_client(pooled_server: ServerProcess) -> None:
    q = f"pgb-{uuid.uuid4().hex[:8]}"

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(q).push([{"data": {"n": 1}}, {"data": {"n": 2}}])
        out["popped"] = await client.queue(q).batch(2).wait(False).pop()
        out["acks"] = [await client.ack(m) for m in out["popped"]]
        out["after"] = await client.queue(q).wait(False).pop()
        return out

    async def main() -> dict[str, Any]:
        async with open_client(pooled_server.url) as client:
            return await asyncio.wait_for(body(client), 30)

    out = asyncio.run(main())
    assert [m["data"] for m in out["popped"]] == [{"n": 1}, {"n": 2}]
    assert all(a["success"] for a in out["acks"]), out["acks"]
    assert out["after"] == []


def test_the_pool_goes_through_pgbouncer_and_the_listeners_go_direct(
    pooled_server: ServerProcess, bouncer: PgBouncer, dbname: str, direct: Conn
) -> None:
    # Concurrent requests make both worker processes open several pooled connections.
    def pop() -> None:
        r = httpx.get(f"{pooled_server.url}/api/v1/pop/queue/pgb-idle", timeout=10)
        assert r.status_code == 204, r.text

    threads = [threading.Thread(target=pop) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    (pool,) = [p for p in bouncer.show("POOLS") if p["database"] == dbname]
    assert pool["pool_mode"] == "transaction"

    def of_both_workers() -> list[dict[str, Any]] | None:
        """Each worker process reads its maintenance flags every second, so both show up."""
        clients = pool_clients(bouncer, dbname)
        return clients if len({c["application_name"] for c in clients}) == 2 else None

    clients = wait_until("pooled clients of both worker processes", of_both_workers)
    servers = server_pids(bouncer, dbname)
    assert len(clients) > POOL_SIZE >= len(servers), (clients, servers)
    # Seen from PostgreSQL: every pooled backend is one of PgBouncer's server connections.
    assert backends(direct, r"application_name ~ '^queen-threads:\d+$'") <= servers
    # The LISTEN connections (one per worker process) bypass PgBouncer.
    listeners = backends(
        direct, "application_name LIKE 'queen-threads-listener:%%' AND query LIKE 'LISTEN%%'"
    )
    assert len(listeners) == 2 and not listeners & servers
    names = {c["application_name"] for c in bouncer.show("CLIENTS")}
    assert not any(n.startswith("queen-threads-listener") for n in names), names


def test_a_notify_sent_through_pgbouncer_wakes_a_long_poll_within_a_second(
    pooled_server: ServerProcess, bouncer: PgBouncer, dbname: str
) -> None:
    q = f"pgb-{uuid.uuid4().hex[:8]}"
    waiter = Waiter(pooled_server.url, q, timeout_ms=15000)
    waiter.start()
    wait_registered(pooled_server.url, 1)
    through_bouncer = connect(bouncer.dsn(dbname))
    try:
        pushed_at = time.monotonic()
        push_by_sql(through_bouncer, q)  # no server process involved: only NOTIFY tells
    finally:
        through_bouncer.close()
    waiter.join(15)
    assert waiter.response is not None and waiter.response.status_code == 200
    assert waiter.response.json()["messages"][0]["data"] == "x"
    assert waiter.answered_at - pushed_at < 1.0, "woken by NOTIFY, not by the 5 s poll"


def test_retention_runs_on_a_direct_session_under_its_advisory_lock(
    pooled_server: ServerProcess, bouncer: PgBouncer, dbname: str, direct_dsn: str, direct: Conn
) -> None:
    q = f"pgb-{uuid.uuid4().hex[:8]}"
    world = World(Database(PoolConfig(dsn=direct_dsn, max_size=1, acquire_timeout_s=5)), direct)
    # Hold the retention row of the shared schedule: the next run stops at its start,
    # inside its advisory lock, where PostgreSQL shows which connection it runs on.
    holder = connect(direct_dsn, autocommit=False)
    try:
        with holder.cursor() as cur:
            cur.execute("SET idle_in_transaction_session_timeout = '20s'")
            cur.execute(
                "INSERT INTO queen.service_runs (service, started_at, owner, runs) "
                "VALUES ('retention', now() - interval '1 hour', 'test', 0) "
                "ON CONFLICT (service) DO UPDATE SET started_at = now() - interval '1 hour'"
            )
        r = httpx.post(
            f"{pooled_server.url}/api/v1/configure",
            json={"queue": q, "options": {"retentionEnabled": True, "retentionSeconds": 60}},
        )
        assert r.status_code in (200, 201), r.text
        items = [{"queue": q, "payload": {"i": i}} for i in range(3)]
        assert httpx.post(f"{pooled_server.url}/api/v1/push", json={"items": items}).is_success
        world.age(q, 3600)

        (blocked,) = wait_until(
            "a retention run waiting for the held row",
            lambda: backends(
                direct,
                "wait_event_type = 'Lock' AND query LIKE '%%queen.service_runs%%' "
                "AND pid <> pg_backend_pid()",
            ),
        )
        assert blocked not in server_pids(bouncer, dbname), "a background session in the pool"
        assert blocked in backends(direct, "application_name = 'queen-threads:maintenance'")
        key = lock_key("retention")
        (held,) = rows(
            direct,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND pid = %s AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1",
            (blocked, key >> 32, key & 0xFFFF_FFFF),
        )[0]
        assert held == 1, "the waiting session holds the service's advisory lock"
    finally:
        holder.rollback()
        holder.close()

    wait_until("retention deleted the aged messages", lambda: not world.tids(q))
    assert sum(world.history(q, "retention")) == 3

    def last_run() -> Any:
        body = httpx.get(f"{pooled_server.url}/api/v1/resources/overview").json()
        run = body["retention"]["services"].get("retention")
        return run if run and run["finishedAt"] and run["runs"] >= 1 else None

    run = wait_until("a finished retention run in the overview", last_run)
    assert run["error"] is None


def test_a_timer_fires_through_pgbouncer_and_wakes_a_long_poll(
    pooled_server: ServerProcess, bouncer: PgBouncer, dbname: str, direct: Conn
) -> None:
    """The firer's claim (FOR UPDATE SKIP LOCKED, one statement) and the announcement's
    NOTIFY go through the pooler; the fire's own lock timeout ends with its transaction."""
    q = f"pgb-{uuid.uuid4().hex[:8]}"
    waiter = Waiter(pooled_server.url, q, timeout_ms=15000)
    waiter.start()
    wait_registered(pooled_server.url, 1)
    op = {"op": "schedule", "queue": q, "timerKey": "t", "payload": "InRpbWVyIg==",
          "delayMs": 300}  # fmt: skip
    r = httpx.post(f"{pooled_server.url}/api/v1/timers", json={"operations": [op]})
    assert r.status_code == 200, r.text
    scheduled_at = time.monotonic()
    waiter.join(15)
    assert waiter.response is not None and waiter.response.status_code == 200
    assert waiter.response.json()["messages"][0]["data"] == "timer"
    assert waiter.answered_at - scheduled_at < 2.0, "woken by the fire, not by the 5 s poll"
    through_bouncer = connect(bouncer.dsn(dbname))
    try:
        lock_timeout = "SELECT current_setting('lock_timeout')"
        assert rows(through_bouncer, lock_timeout) == rows(direct, lock_timeout)
    finally:
        through_bouncer.close()


def test_pgbouncer_server_connections_keep_no_session_state(
    pooled_server: ServerProcess, bouncer: PgBouncer, dbname: str, direct: Conn
) -> None:
    q = f"pgb-{uuid.uuid4().hex[:8]}"
    items = [{"queue": q, "payload": {"i": i}} for i in range(5)]
    assert httpx.post(f"{pooled_server.url}/api/v1/push", json={"items": items}).is_success
    r = httpx.get(f"{pooled_server.url}/api/v1/pop/queue/{q}", params={"batch": "5"})
    assert r.status_code == 200 and len(r.json()["messages"]) == 5

    settings = (
        "SELECT current_setting('statement_timeout'), current_setting('lock_timeout'), "
        "current_setting('idle_in_transaction_session_timeout')"
    )
    defaults = rows(direct, settings)  # a fresh session's values
    through_bouncer = connect(bouncer.dsn(dbname))
    try:
        # The server connection the pool used last (PgBouncer reuses the most recent one).
        assert rows(through_bouncer, settings) == defaults
        assert rows(through_bouncer, "SELECT count(*) FROM pg_listening_channels()") == [(0,)]
    finally:
        through_bouncer.close()
    servers = server_pids(bouncer, dbname)
    assert servers
    leftovers = rows(
        direct,
        "SELECT pid, locktype FROM pg_locks WHERE pid = ANY(%s) AND locktype = 'advisory'",
        (list(servers),),
    )
    assert leftovers == []
