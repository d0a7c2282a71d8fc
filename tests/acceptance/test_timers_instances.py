"""Timers with two server instances on one database: every timer fires exactly once
whichever firers race for it, and a timer scheduled on one instance fires on time on the
other when the first is gone (the announcement, a NOTIFY, woke the other's firer).
"""

from __future__ import annotations

import base64
import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import psycopg2
import pytest

from tests.acceptance.test_long_poll import SLOW_POLLING
from tests.support.server import ServerProcess, all_started

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)

API = "/api/v1"
TIMERS = 300
PER_CALL = 20
LATE_BOUND_S = 0.5  # accepted lateness on a busy CI machine (bench: p50/p99)


def op(queue: str, key: str, delay_ms: int) -> dict[str, Any]:
    return {"op": "schedule", "queue": queue, "timerKey": key, "delayMs": delay_ms,
            "payload": base64.b64encode(orjson.dumps({"key": key})).decode(),
            "txn": f"txn-{key}"}  # fmt: skip


@contextlib.contextmanager
def instances(dsn: str, *envs: dict[str, Any]) -> Iterator[list[ServerProcess]]:
    with all_started([ServerProcess(dsn, workers=1, **env) for env in envs]) as servers:
        yield servers


def one(dsn: str, statement: str, *args: Any) -> Any:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(statement, args)
        row = cur.fetchone()
    conn.close()
    return row[0] if row else None


def test_every_timer_fires_exactly_once_with_two_instances_racing(migrated_dsn: str) -> None:
    queue = f"tm-race-{uuid.uuid4().hex[:6]}"
    small = {"TIMERS_FIRE_BATCH": "4"}  # many small claims, so the firers overlap
    with instances(migrated_dsn, small, small) as servers:
        clients = [httpx.Client(base_url=s.url, timeout=30) for s in servers]
        keys = [f"k{i:04d}" for i in range(TIMERS)]
        for n, start in enumerate(range(0, TIMERS, PER_CALL)):
            # Due between 0.3 and 1.5 s from now, some already in the past.
            ops = [op(queue, k, -50 + (i * 7) % 1500) for i, k in
                   enumerate(keys[start:start + PER_CALL], start)]  # fmt: skip
            r = clients[n % 2].post(f"{API}/timers", json={"operations": ops})
            assert r.status_code == 200, r.text
        deadline = time.monotonic() + 20
        pending_sql = ("SELECT count(*) FROM queen.timers t JOIN queen.queues q"
                       " ON q.id = t.queue_id WHERE q.name = %s")  # fmt: skip
        while one(migrated_dsn, pending_sql, queue) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert one(migrated_dsn, pending_sql, queue) == 0, "timers left unfired"
        firers = [c.get("/metrics").json()["timers"]["firer"] for c in clients]
        for c in clients:
            c.close()

    stored = one(migrated_dsn, "SELECT count(DISTINCT m.transaction_id) || '/' || count(*)"
                 " FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id"
                 " JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = %s", queue)  # fmt: skip
    assert stored == f"{TIMERS}/{TIMERS}"
    fires = one(migrated_dsn, "SELECT count(*) || '/' || count(*) FILTER (WHERE status ="
                " 'queued') FROM queen.timer_fires WHERE queue_name = %s", queue)  # fmt: skip
    assert fires == f"{TIMERS}/{TIMERS}", "a timer was fired twice (or not stored)"
    assert sum(f["fired"] for f in firers) == TIMERS
    assert sum(f["duplicates"] for f in firers) == 0


def test_a_timer_scheduled_on_a_stopped_instance_fires_on_time_on_the_other(
    migrated_dsn: str,
) -> None:
    """The other instance's firer knows of no timer and would sleep a minute
    (TIMERS_MAX_SLEEP_MS); only the announcement of the schedule wakes it on time."""
    queue = f"tm-handover-{uuid.uuid4().hex[:6]}"
    sleepy = {"TIMERS_MAX_SLEEP_MS": "60000", **SLOW_POLLING}
    delay_ms = 8000  # A must be gone before then, with room for a slow shutdown
    with instances(migrated_dsn, sleepy, sleepy) as (a, b):
        with httpx.Client(base_url=a.url, timeout=30) as ca:
            r = ca.post(f"{API}/timers", json={"operations": [op(queue, "handover", delay_ms)]})
            assert r.status_code == 200, r.text
        scheduled = time.monotonic()
        a.stop()
        assert time.monotonic() - scheduled < delay_ms / 1000 - 0.5, "instance A stopped late"
        with httpx.Client(base_url=b.url, timeout=30) as cb:
            pop = cb.get(f"{API}/pop/queue/{queue}", params={"wait": "true", "timeout": 15000})
            answered = time.monotonic() - scheduled
    assert pop.status_code == 200, "the timer did not fire on the other instance"
    assert pop.json()["messages"][0]["data"] == {"key": "handover"}
    late_s = one(migrated_dsn, "SELECT extract(epoch FROM fired_at - deliver_at)::float8"
                 " FROM queen.timer_fires WHERE queue_name = %s", queue)  # fmt: skip
    assert 0 <= late_s < LATE_BOUND_S
    assert answered < delay_ms / 1000 + 2.0


def test_one_instance_with_several_processes_fires_each_timer_once(migrated_dsn: str) -> None:
    queue = f"tm-procs-{uuid.uuid4().hex[:6]}"
    with (
        ServerProcess(migrated_dsn, workers=2, TIMERS_FIRE_BATCH="2") as srv,
        httpx.Client(base_url=srv.url, timeout=30) as c,
    ):
        ops = [op(queue, f"p{i}", 200) for i in range(50)]
        assert c.post(f"{API}/timers", json={"operations": ops}).status_code == 200
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = one(migrated_dsn, "SELECT count(*) FROM queen.timer_fires"
                      " WHERE queue_name = %s", queue)  # fmt: skip
            if got == 50:
                break
            time.sleep(0.05)
    assert one(migrated_dsn, "SELECT count(*) FROM queen.timer_fires WHERE queue_name = %s"
               " AND status = 'queued'", queue) == 50  # fmt: skip
