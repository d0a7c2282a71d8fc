"""An ack's work does not grow with its queue's partitions (issue 31: cost grows slowly).

What would grow is a sequential scan of `queen.partitions` (every partition row read, and
the request's partitionId parsed once per row): counted here as the tuples the ack's own
transaction read sequentially from that table, through the two ack entry points the server
calls (one partition: `ack_partition_v2`; several: `ack_messages_v3`).
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


def _seq_rows_of_partitions(conn: Conn, statement: str, *args: Any) -> tuple[Any, int]:
    """The statement's answer and the rows its transaction read from queen.partitions by
    sequential scan (committed: the ack is real)."""
    read = (
        "SELECT coalesce(sum(seq_tup_read), 0)::bigint FROM pg_stat_xact_user_tables"
        " WHERE schemaname = 'queen' AND relname = 'partitions'"
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
def test_an_ack_reads_no_partition_row_by_scan(pg_conn: Conn, entry: str) -> None:
    queue = f"ackcost-{uuid.uuid4().hex[:8]}"
    message = _popped(pg_conn, queue)
    acks = json.dumps({"acks": [_ack_item(message)]})
    if entry == "ack_partition_v2":
        text, scanned = _seq_rows_of_partitions(
            pg_conn, "SELECT queen.ack_partition_v2(%s::uuid, %s::text)",
            message["partitionId"], acks,
        )  # fmt: skip
    else:
        text, scanned = _seq_rows_of_partitions(
            pg_conn, "SELECT results::text FROM queen.ack_messages_v3(%s::jsonb)", acks
        )
    answer = json.loads(text)
    (result,) = answer if isinstance(answer, list) else answer["results"]
    assert result["success"] is True and result["status"] == "completed"
    assert scanned == 0, f"the ack read {scanned} partition rows by sequential scan"
