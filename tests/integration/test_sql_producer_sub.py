"""The stored procedures the official client's auth tests call directly (psycopg2, no
server): `queen.push_messages_v2` keeps an item's producerSub (NULLIF ''), and
`queen.pop_specific_batch` pops as the HTTP layer does and shows it."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.integration.test_sql_queue_core import Conn, call, sql


def stored(conn: Conn, queue: str, tid: str) -> Any:
    rows = sql(
        conn,
        "SELECT m.producer_sub FROM queen.messages m"
        " JOIN queen.partitions p ON p.id = m.partition_id"
        " JOIN queen.queues q ON q.id = p.queue_id"
        " WHERE q.name = %s AND m.transaction_id = %s",
        queue,
        tid,
    )
    assert len(rows) == 1
    return rows[0][0]


def push_one(conn: Conn, queue: str, **extra: Any) -> str:
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    item = {"queue": queue, "partition": "Default", "transactionId": tid, "payload": {"x": 1}}
    [result] = call(conn, "push_messages_v2", [item | extra])
    assert result["status"] == "queued"
    return tid


def pop_specific(conn: Conn, queue: str, **extra: Any) -> list[dict[str, Any]]:
    request = {
        "idx": 0, "queue_name": queue, "partition_name": "Default",
        "consumer_group": "__QUEUE_MODE__", "lease_seconds": 60,
        "worker_id": f"test-worker-{int(time.time() * 1000)}", "batch_size": 10,
        "sub_mode": "all", "sub_from": "",
    } | extra  # fmt: skip
    [out] = call(conn, "pop_specific_batch", [request])
    assert out["idx"] == 0
    messages: list[dict[str, Any]] = out["result"]["messages"]
    return messages


def test_producer_sub_round_trip_via_stored_procedures(pg_conn: Conn) -> None:
    tid = push_one(pg_conn, "sp-roundtrip", producerSub="sp-test-sub")
    assert stored(pg_conn, "sp-roundtrip", tid) == "sp-test-sub"
    [message] = pop_specific(pg_conn, "sp-roundtrip")
    assert message["transactionId"] == tid and message["producerSub"] == "sp-test-sub"
    assert message["data"] == {"x": 1} and message["leaseId"]


def test_producer_sub_null_when_not_provided_or_empty(pg_conn: Conn) -> None:
    none = push_one(pg_conn, "sp-null")
    empty = push_one(pg_conn, "sp-null", producerSub="")
    assert stored(pg_conn, "sp-null", none) is None
    assert stored(pg_conn, "sp-null", empty) is None
    assert [m["producerSub"] for m in pop_specific(pg_conn, "sp-null")] == [None, None]


def test_pop_specific_batch_leases_like_the_http_pop(pg_conn: Conn) -> None:
    for _ in range(3):
        push_one(pg_conn, "sp-lease")
    first = pop_specific(pg_conn, "sp-lease", batch_size=2, lease_seconds=7)
    assert len(first) == 2
    [(seconds,)] = sql(
        pg_conn,
        "SELECT extract(epoch FROM pc.lease_expires_at - pc.lease_acquired_at)"
        " FROM queen.partition_consumers pc JOIN queen.partitions p ON p.id = pc.partition_id"
        " JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'sp-lease'",
    )
    assert float(seconds) == 7
    assert pop_specific(pg_conn, "sp-lease") == []  # the partition is leased
    acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
             "leaseId": m["leaseId"], "status": "completed"} for m in first]  # fmt: skip
    assert all(r["success"] for r in call(pg_conn, "ack_messages_v2", {"acks": acks}))
    [rest] = pop_specific(pg_conn, "sp-lease")
    assert rest["transactionId"] not in {m["transactionId"] for m in first}


def test_pop_specific_batch_answers_each_request_in_order(pg_conn: Conn) -> None:
    push_one(pg_conn, "sp-multi-a")
    requests = [
        {"idx": 5, "queue_name": "sp-multi-b", "partition_name": "Default", "batch_size": 1},
        {"idx": 9, "queue_name": "sp-multi-a", "partition_name": "Default", "batch_size": 1},
    ]
    out = call(pg_conn, "pop_specific_batch", requests)
    assert [(o["idx"], len(o["result"]["messages"])) for o in out] == [(5, 0), (9, 1)]
    assert call(pg_conn, "pop_specific_batch", {"not": "an array"}) == []
