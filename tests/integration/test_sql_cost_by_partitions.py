"""A push's and an ack's work do not grow with the partitions in the database (issue 31:
cost grows slowly).

What would grow is a read of every row of `queen.partitions` (or `queen.queues`): a
sequential scan (for the ack, with the request's partitionId parsed once per row) or a full
index scan (the push's lookups, once joined by hash). Counted here as the rows the statement's own
transaction read from that table, through the entry points the server calls (push: one
partition `push_partition_v2` and `_v3`, several `push_messages_v4`; ack: one partition
`ack_partition_v2`, several `ack_messages_v3`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg2.extensions
import pytest

Conn = psycopg2.extensions.connection
PARTITIONS = 250  # (from about 300 the planner picks the index by itself)


def _value(conn: Conn, query: str, *args: Any) -> Any:
    with conn.cursor() as cur:
        cur.execute(query, args)
        row = cur.fetchone()
        assert row is not None
        return row[0]


def _popped(conn: Conn, queue: str) -> dict[str, Any]:
    """A message of p7 (pushed with one message in each of PARTITIONS partitions)."""
    items = [{"queue": queue, "partition": f"p{i}", "payload": i} for i in range(PARTITIONS)]
    _value(conn, "SELECT queen.push_messages_v2(%s::jsonb)::text", json.dumps(items))
    _value(conn, "ANALYZE queen.partitions; SELECT 1")
    req = {"idx": 0, "queue": queue, "partition": "p7", "batch": 1, "leaseId": str(uuid.uuid4())}
    res = json.loads(_value(conn, "SELECT queen.pop_unified_batch(%s::jsonb)::text",
                            json.dumps([req])))  # fmt: skip
    (message,) = res[0]["messages"]
    return dict(message)


def _ack_item(m: dict[str, Any]) -> dict[str, Any]:
    return {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
            "status": "completed", "consumerGroup": "__QUEUE_MODE__",
            "leaseId": m["leaseId"]}  # fmt: skip


def _rows_of_partitions(conn: Conn, statement: str, *args: Any) -> tuple[Any, int]:
    """The statement's answer and the rows its transaction read from queen.partitions and
    queen.queues, by scan or by index (committed: the push or ack is real)."""
    read = (
        "SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0)::bigint"
        " FROM pg_stat_xact_user_tables"
        " WHERE schemaname = 'queen' AND relname IN ('partitions', 'queues')"
    )
    conn.autocommit = False
    try:
        before = _value(conn, read)  # (counts not yet flushed of earlier transactions too)
        answer = _value(conn, statement, *args)
        after = _value(conn, read)
        conn.commit()
    finally:
        conn.autocommit = True
    return answer, int(after - before)


@pytest.mark.parametrize("entry", ["ack_partition_v2", "ack_messages_v3"])
def test_an_ack_reads_its_partition_by_key(pg_conn: Conn, entry: str) -> None:
    queue = f"ackcost-{uuid.uuid4().hex[:8]}"
    message = _popped(pg_conn, queue)
    acks = json.dumps({"acks": [_ack_item(message)]})
    if entry == "ack_partition_v2":
        text, scanned = _rows_of_partitions(
            pg_conn, "SELECT queen.ack_partition_v2(%s::uuid, %s::text)",
            message["partitionId"], acks,
        )  # fmt: skip
    else:
        text, scanned = _rows_of_partitions(
            pg_conn, "SELECT results::text FROM queen.ack_messages_v3(%s::jsonb)", acks
        )
    answer = json.loads(text)
    (result,) = answer if isinstance(answer, list) else answer["results"]
    assert result["success"] is True and result["status"] == "completed"
    assert scanned <= 4, f"the ack read {scanned} rows of queen.partitions and queen.queues"


@pytest.mark.parametrize("entry", ["push_partition_v2", "push_partition_v3", "push_messages_v4"])
def test_a_push_reads_its_partition_by_key(pg_conn: Conn, entry: str) -> None:
    queue = f"pushcost-{uuid.uuid4().hex[:8]}"
    message = _popped(pg_conn, queue)  # PARTITIONS partitions in the database
    item = {"queue": queue, "partition": "p7", "payload": "x",
            "transactionId": str(uuid.uuid4()), "traceId": None, "producerSub": None}  # fmt: skip
    if entry.startswith("push_partition_"):
        text, read = _rows_of_partitions(
            pg_conn, f"SELECT queen.{entry}(%s::uuid, %s::text)",
            message["partitionId"], json.dumps([item]),
        )  # fmt: skip
    else:
        text, read = _rows_of_partitions(
            pg_conn, "SELECT results::text FROM queen.push_messages_v4(%s::jsonb)",
            json.dumps([item]),
        )  # fmt: skip
    (row,) = json.loads(text)  # compact answers: [status, message id, partition id, ...]
    assert row[0] == "queued" and row[2] == message["partitionId"]
    # (a few key lookups, each of one row: before, every row of queen.partitions)
    assert read <= 12, f"the push read {read} rows of queen.partitions and queen.queues"
