"""A worker node stopped under load (issue 33, part 5), through the real server on the
coordinator: pushes to the partitions of the other worker keep being stored, pushes to the
stopped worker's partitions are taken by the failover buffer (201, "buffered") and pops of
them answer 503; when the worker is back the buffer replays them. Nothing is lost, and
nothing acked is delivered again."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg2
import pytest

from tests.support.citus import CitusCluster
from tests.support.server import ServerProcess

PARTITIONS = [f"p{i}" for i in range(8)]  # 8 shards over 2 workers: both get some
ROUNDS = 3


@pytest.fixture
def server(citus_dsn: str, tmp_path: Path) -> Iterator[ServerProcess]:
    # One worker process: healthy means its start-up migration is done. (A second process
    # may still be migrating when the test stops a worker; a migration needs every node, so
    # that process would answer 503 until the worker is back.)
    with ServerProcess(citus_dsn, workers=1, FILE_BUFFER_DIR=str(tmp_path / "buffers"),
                       FILE_BUFFER_FLUSH_MS="100") as srv:  # fmt: skip
        yield srv


def _sql(dsn: str, text: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(text, params)
        rows = cur.fetchall()
    conn.close()
    return rows


def _placement(dsn: str, queue: str) -> dict[str, int]:
    """Partition name -> the port of the worker holding its shard."""
    rows = _sql(dsn, """
        SELECT p.name, n.nodeport
          FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
          JOIN pg_dist_placement pl
            ON pl.shardid = get_shard_id_for_distribution_column('queen.messages', p.id)
          JOIN pg_dist_node n ON n.groupid = pl.groupid
         WHERE q.name = %s""", (queue,))  # fmt: skip
    return {name: port for name, port in rows}


def _stored(dsn: str, queue: str, partitions: list[str] = PARTITIONS) -> dict[str, list[str]]:
    """Partition name -> the transaction ids of its stored messages, in order (read only
    from the nodes holding `partitions`: a read of a stopped node's shards fails)."""
    ids = dict(_sql(dsn, """
        SELECT p.id::text, p.name FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
         WHERE q.name = %s AND p.name = ANY (%s)""", (queue, partitions)))  # fmt: skip
    rows = _sql(dsn, """
        SELECT m.partition_id::text, m.transaction_id FROM queen.messages m
         WHERE m.partition_id = ANY (%s::uuid[])
         ORDER BY m.partition_id, m.created_at, m.id""", (list(ids),))  # fmt: skip
    out: dict[str, list[str]] = {}
    for pid, txn in rows:
        out.setdefault(ids[pid], []).append(txn)
    return out


def _eventually(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def test_a_stopped_worker_buffers_its_partitions_pushes_and_they_are_replayed_once(
    citus_cluster: CitusCluster, citus_dsn: str, server: ServerProcess
) -> None:
    queue = f"faults-{uuid.uuid4().hex[:8]}"
    api = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30)

    def push(partition: str, txn: str) -> dict[str, Any]:
        item = {"queue": queue, "partition": partition, "transactionId": txn, "payload": {"t": txn}}
        r = api.post("/push", json={"items": [item]})
        assert r.status_code == 201, r.text
        return dict(r.json()[0])

    for part in PARTITIONS:
        assert push(part, f"{part}-0")["status"] == "queued"
    where = _placement(citus_dsn, queue)
    down_port = citus_cluster.ports["worker2"]
    down = [p for p in PARTITIONS if where[p] == down_port]
    up = [p for p in PARTITIONS if where[p] != down_port]
    assert down and up, where
    expected = {p: [f"{p}-{i}" for i in range(ROUNDS + 1)] for p in PARTITIONS}

    citus_cluster.stop_node("worker2")
    try:
        statuses = {p: [push(p, f"{p}-{i}")["status"] for i in range(1, ROUNDS + 1)]
                    for p in PARTITIONS}  # fmt: skip
        assert all(s == "buffered" for p in down for s in statuses[p]), statuses
        assert all(s in ("queued", "buffered") for p in up for s in statuses[p]), statuses
        # the other worker's partitions are stored while this one is down (a push the
        # buffer took during a blip is replayed there at once)
        assert _eventually(
            lambda: all(_stored(citus_dsn, queue, up).get(p) == expected[p] for p in up), 30
        ), _stored(citus_dsn, queue, up)
        # and served: a pop and its ack there; a pop of a stopped partition answers 503
        r = api.get(f"/pop/queue/{queue}/partition/{up[0]}", params={"batch": 10, "wait": "false"})
        assert r.status_code == 200, r.text
        popped = r.json()["messages"]
        assert [m["transactionId"] for m in popped] == expected[up[0]]
        acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                 "leaseId": m["leaseId"], "status": "completed"} for m in popped]  # fmt: skip
        r = api.post("/ack/batch", json={"acknowledgments": acks})
        assert r.status_code == 200, r.text
        r = api.get(f"/pop/queue/{queue}/partition/{down[0]}",
                    params={"batch": 10, "wait": "false"})  # fmt: skip
        assert r.status_code == 503, r.text
    finally:
        citus_cluster.start_node("worker2")

    # replayed when the worker is back: every message stored, once, in push order
    replayed = _eventually(lambda: _stored(citus_dsn, queue) == expected, 60)
    assert replayed, (_stored(citus_dsn, queue), expected)
    # nothing acked comes back; the replayed partitions deliver everything
    r = api.get(f"/pop/queue/{queue}/partition/{up[0]}", params={"batch": 10, "wait": "false"})
    assert r.status_code == 204, r.text
    for part in down:
        r = api.get(f"/pop/queue/{queue}/partition/{part}", params={"batch": 10, "wait": "false"})
        assert r.status_code == 200, r.text
        assert [m["transactionId"] for m in r.json()["messages"]] == expected[part]
    api.close()
