"""Queen's SQL API on a Citus cluster (docs/sql.md, docs/scaling.md "Citus"): the API runs
on the coordinator, and a produce, a consume and a commit of one partition send their
statements to the one worker that holds it (citus.log_remote_commands); its wake-ups are
sent on the coordinator at commit, where the servers listen; both faces share the data."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.acceptance.test_long_poll import SLOW_POLLING, Waiter
from tests.support.citus import NODES, CitusCluster
from tests.support.server import ServerProcess
from tests.support.sql_api import Listener, SqlFace


@pytest.fixture(scope="module")
def server(citus_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(citus_dsn, workers=1, **SLOW_POLLING) as srv:
        yield srv


def _name() -> str:
    return f"csq_{uuid.uuid4().hex[:8]}"


def _holder(face: SqlFace, queue: str, partition: str) -> int:
    pid = face.one(
        "SELECT p.id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id"
        " WHERE q.name = %s AND p.name = %s",
        queue,
        partition,
    )
    shard = "get_shard_id_for_distribution_column('queen.messages', %s)"
    return int(face.one(f"SELECT nodeport FROM citus_shards WHERE shardid = {shard}", pid))


def _nodes(face: SqlFace, sql: str, *args: Any) -> tuple[Counter[int], Any]:
    """What the statement answered, and the round trips it made to each worker."""
    face.conn.notices.clear()
    rows = face.rows(sql, *args)
    face.commit()
    ports = re.findall(r"on server \S+@[\d.]+:(\d+)", "".join(face.conn.notices))
    return Counter(int(p) for p in ports), rows


def test_a_partitions_produce_consume_and_commit_are_one_workers_work(
    citus_cluster: CitusCluster, citus_dsn: str
) -> None:
    q = _name()
    app = SqlFace(citus_dsn)
    try:
        app.produce_one(q, "first", "P")  # creates the queue and the partition (every node)
        app.commit()
        assert app.consume_one(q, partition="P")  # registers the group (every node)
        app.rollback()
        holder = _holder(app, q, "P")
        assert holder in {citus_cluster.ports[n] for n in NODES[1:]}
        app.one("SET citus.log_remote_commands = on")
        app.one("SET client_min_messages = log")
        app.commit()
        nodes, _ = _nodes(app, "SELECT queen.produce_one(%s, '2', 'P')", q)
        assert set(nodes) == {holder}
        nodes, _ = _nodes(app, "SELECT queen.produce(%s::jsonb)", json.dumps(
            [{"queue": q, "partition": "P", "payload": n} for n in range(3)]))  # fmt: skip
        assert set(nodes) == {holder}
        nodes, rows = _nodes(app, "SELECT partition_id::text, transaction_id, lease_id, payload"
                                  " FROM queen.consume_one(%s, batch_size => 10, partition => 'P')",
                             q)  # fmt: skip
        assert set(nodes) == {holder} and [r[3] for r in rows] == ["first", 2, 0, 1, 2]
        for pid, txn, lease, _ in rows:
            nodes, answer = _nodes(app, "SELECT queen.commit_one(%s, %s::uuid, %s)",
                                   txn, pid, lease)  # fmt: skip
            assert set(nodes) == {holder} and answer == [(True,)]
    finally:
        app.close()


def test_wake_ups_are_sent_on_the_coordinator_at_commit(citus_dsn: str) -> None:
    q = _name()
    app = SqlFace(citus_dsn)
    listener = Listener(citus_dsn)
    try:
        app.one("SELECT queen.wake_interest_v1(%s::jsonb)", json.dumps(
            {"origin": "elsewhere", "ttlMs": 60_000, "selectors": [{"queue": q}]}))  # fmt: skip
        app.commit()
        app.produce_one(q, 1, "P")
        assert listener.events(0.3) == []
        app.commit()
        assert [(e["kind"], e["queue"], e["partition"]) for e in listener.events()] == [
            ("push", q, "P")]  # fmt: skip
        app.produce_one(q, 2, "P")
        app.rollback()
        assert listener.events(0.3) == []
        [row] = app.consume_one(q)
        app.commit_one(row)
        app.commit()
        assert [(e["kind"], e["queue"]) for e in listener.events()] == [("free", q)]
    finally:
        listener.close()
        app.close()


def test_both_faces_share_the_queue_and_a_commit_wakes_the_server(
    server: ServerProcess, citus_dsn: str
) -> None:
    q = _name()
    waiter = Waiter(server.url, q, timeout_ms=20000)
    waiter.start()
    app = SqlFace(citus_dsn)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the long poll says it waits (interest.py)
            waiting = app.one("SELECT count(*) FROM queen.wake_interest"
                              " WHERE selector ->> 'queue' = %s", q)  # fmt: skip
            app.commit()
            if waiting:
                break
            time.sleep(0.02)
        mid = app.produce_one(q, {"from": "sql"})
        app.commit()
        committed_at = time.monotonic()
        waiter.join(15)
        assert waiter.response is not None and waiter.response.status_code == 200
        # the server's own next look is 5 s away: only the wake-up is sooner
        assert waiter.answered_at - committed_at < 4
        [message] = waiter.response.json()["messages"]
        assert int(message["id"]) == mid and message["data"] == {"from": "sql"}
        r = httpx.post(f"{server.url}/api/v1/push", timeout=10,
                       json={"items": [{"queue": q, "payload": {"from": "http"}}]})  # fmt: skip
        assert r.status_code == 201
        ack = {"transactionId": message["transactionId"], "partitionId": message["partitionId"],
               "leaseId": message["leaseId"], "status": "completed"}  # fmt: skip
        assert httpx.post(f"{server.url}/api/v1/ack", json=ack, timeout=10).status_code == 200
        [row] = app.consume_one(q)
        assert row["payload"] == {"from": "http"} and app.commit_one(row)
        app.commit()
    finally:
        app.close()
