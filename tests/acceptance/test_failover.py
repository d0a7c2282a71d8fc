"""Failover through the real server (gunicorn -k gevent, 2 workers): PostgreSQL stops,
pushes are buffered, the server is killed with SIGKILL in the middle of a push, a new
server on the same FILE_BUFFER_DIR takes over, and once PostgreSQL is back every message
is stored exactly once, in push order per partition. Maintenance mode on the real server.
"""

from __future__ import annotations

import itertools
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import psycopg2
from prometheus_client.parser import text_string_to_metric_families

from queen_threads import migrate
from queen_threads.buffer import encode_record
from queen_threads.embedded import EmbeddedPostgres
from tests.support.outage import OutageServer as Server
from tests.support.outage import kill_hard, wait_for
from tests.support.server import ServerProcess

API = "/api/v1"
BATCH_SIZES = (1, 7, 25, 3, 60, 13, 100, 2, 40, 9)


def buffers(srv: ServerProcess) -> dict[str, Any]:
    return dict(httpx.get(f"{srv.url}{API}/status/buffers", timeout=5).json())


def push(srv: ServerProcess, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = httpx.post(f"{srv.url}{API}/push", json={"items": items}, timeout=10)
    assert r.status_code == 201, r.text
    return list(r.json())


def item(i: int) -> dict[str, Any]:
    return {"queue": "fo", "partition": f"p{i % 3}", "payload": {"i": i}, "transactionId": f"m{i}"}


def batches(total: int) -> list[list[dict[str, Any]]]:
    out, i = [], 0
    for size in itertools.cycle(BATCH_SIZES):
        if i >= total:
            return out
        out.append([item(n) for n in range(i, min(i + size, total))])
        i += size
    raise AssertionError("unreachable")


def send_without_reading(srv: ServerProcess, items: list[dict[str, Any]]) -> socket.socket:
    """Put a push on the wire and return before its answer (it is in flight)."""
    body = orjson.dumps({"items": items})
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    sock.sendall(
        b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def stored(dsn: str, queue: str) -> list[tuple[str, int, str]]:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                """SELECT p.name, (m.payload ->> 'i')::int, m.transaction_id
                     FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
                     JOIN queen.queues q ON q.id = p.queue_id
                    WHERE q.name = %s ORDER BY m.created_at, m.id""",
                (queue,),
            )
            return [(r[0], r[1], r[2]) for r in cur.fetchall()]
    finally:
        conn.close()


def buffer_until_killed(
    srv: ServerProcess, plan: list[list[dict[str, Any]]], kill_after: int
) -> int:
    """Push the batches (all must be answered buffered); once `kill_after` items are in,
    SIGKILL the server while the next push is in flight. The index of that batch (whose
    outcome is unknown, so the client pushes it again)."""
    pushed = 0
    try:
        for k, batch in enumerate(plan):
            if pushed >= kill_after:
                sock = send_without_reading(srv, batch)
                kill_hard(srv)
                sock.close()
                return k
            out = push(srv, batch)
            assert [r["status"] for r in out] == ["buffered"] * len(batch)
            assert [r["transactionId"] for r in out] == [i["transactionId"] for i in batch]
            pushed += len(batch)
    finally:
        if srv.proc is not None and srv.proc.poll() is None:
            kill_hard(srv)
    raise AssertionError("the plan ended before the kill")


def assert_all_once_in_push_order(dsn: str, total: int = 1000) -> None:
    rows = stored(dsn, "fo")
    assert len(rows) == total
    assert {r[2] for r in rows} == {f"m{i}" for i in range(total)}  # exactly once
    for p in ("p0", "p1", "p2"):
        got = [i for name, i, _ in rows if name == p]
        assert got == [i for i in range(total) if f"p{i % 3}" == p], p  # push order


def test_outage_and_kill_9_lose_nothing_and_keep_order(
    private_pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    migrate.migrate(private_pg.dsn)
    env = {"FILE_BUFFER_DIR": str(tmp_path / "buffers"), "FILE_BUFFER_FLUSH_MS": "50"}
    plan = batches(1000)
    assert len({len(b) for b in plan}) == len(BATCH_SIZES)

    first = Server(private_pg.dsn, workers=2, **env).start()
    private_pg.stop()
    resume = buffer_until_killed(first, plan, 400)
    assert list((tmp_path / "buffers").glob("failover-*.buf*"))  # the killed server's files

    # A new server on the same folder, PostgreSQL still down: the rest is buffered too.
    with Server(private_pg.dsn, workers=2, **env) as second:
        for batch in plan[resume:]:
            out = push(second, batch)
            assert [r["status"] for r in out] == ["buffered"] * len(batch)
        assert buffers(second)["pending"] >= sum(len(b) for b in plan[resume:])

        private_pg.restart()
        wait_for(lambda: buffers(second)["pending"] == 0, what="replay of the buffer")
        status = buffers(second)
        assert status["failed"] == 0 and status["files"] == []
    assert_all_once_in_push_order(private_pg.dsn)


def test_a_restarted_server_replays_what_a_killed_one_left_torn_tail_included(
    private_pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    migrate.migrate(private_pg.dsn)
    folder = tmp_path / "buffers"
    env = {"FILE_BUFFER_DIR": str(folder), "FILE_BUFFER_FLUSH_MS": "50"}
    plan = batches(1000)
    first = Server(private_pg.dsn, workers=2, **env).start()
    private_pg.stop()
    resume = buffer_until_killed(first, plan, 600)
    # The write a kill cuts short leaves half a record at the end of a file.
    record = encode_record({"ts": time.time_ns(), **item(0), "transactionId": "torn"})
    with max(folder.glob("failover-*.buf*")).open("ab") as f:
        f.write(record[: len(record) // 2])

    private_pg.restart()
    with ServerProcess(private_pg.dsn, workers=2, **env) as second:  # replays at startup
        wait_for(lambda: buffers(second)["pending"] == 0, what="startup replay")
        status = buffers(second)
        assert status["tornRecords"] == 1 and status["failed"] == 0
        assert "unreadable tail skipped" in second.logs()
        for batch in plan[resume:]:  # the client goes on (and retries the unanswered push)
            out = push(second, batch)
            assert {r["status"] for r in out} <= {"queued", "duplicate"}
    assert_all_once_in_push_order(private_pg.dsn)


def test_maintenance_mode_on_the_real_server(migrated_dsn: str, tmp_path: Path) -> None:
    env = {"FILE_BUFFER_DIR": str(tmp_path / "buffers"), "FILE_BUFFER_FLUSH_MS": "50"}
    with ServerProcess(migrated_dsn, workers=2, **env) as srv:
        url = f"{srv.url}{API}"
        r = httpx.post(f"{url}/system/maintenance", json={"enabled": True})
        assert r.status_code == 200 and r.json()["maintenanceMode"] is True

        def both_workers_see_it() -> bool:
            """Every worker process picks the switch up within about a second; each one
            reports its own state in the cross-process Prometheus exposition, whichever
            process answers the scrape."""
            text = httpx.get(f"{srv.url}/metrics/prometheus").text
            applied = [
                sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.name == "queen_worker_maintenance_mode"
            ]
            return len(applied) == 2 and all(v == 1 for v in applied)

        wait_for(both_workers_see_it, timeout=10, what="both workers in maintenance")
        for batch in batches(100):
            out = push(srv, batch)
            assert {r["status"] for r in out} == {"buffered"}
        for p in ("p0", "p1", "p2"):  # pops see nothing new
            assert httpx.get(f"{url}/pop/queue/fo/partition/{p}").status_code == 204
        assert buffers(srv)["pending"] == 100

        r = httpx.post(f"{url}/system/maintenance", json={"enabled": False})
        assert r.status_code == 200 and r.json()["maintenanceMode"] is False
        wait_for(lambda: buffers(srv)["pending"] == 0, what="drain")
        for p in ("p0", "p1", "p2"):
            pop = httpx.get(f"{url}/pop/queue/fo/partition/{p}", params={"batch": 1000})
            assert pop.status_code == 200
            got = [m["data"]["i"] for m in pop.json()["messages"]]
            assert got == [i for i in range(100) if f"p{i % 3}" == p]
