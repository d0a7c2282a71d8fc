"""queen._ack_fast, the one-pass ack of the common shape (schema/functions/40_ack.sql), does
exactly what queen._ack_items does item by item: the same answer and the same stored
state, compared in one transaction (the same now()) for each shape of request, and it
declines (NULL, nothing written) whatever is not of its shape."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import psycopg2.extensions
import pytest

Conn = psycopg2.extensions.connection
Msgs = list[dict[str, Any]]


def value(conn: Conn, query: str, *args: Any) -> Any:
    with conn.cursor() as cur:
        cur.execute(query, args)
        row = cur.fetchone()
        return row[0] if row else None


def call(conn: Conn, fn: str, payload: Any) -> Any:
    text = value(conn, f"SELECT queen.{fn}(%s::jsonb)::text", json.dumps(payload))
    return None if text is None else json.loads(text)


def popped_batch(conn: Conn, queue: str, count: int = 10) -> Msgs:
    items = [
        {"queue": queue, "partition": "p0", "payload": {"n": i}, "transactionId": uuid.uuid4().hex}
        for i in range(count)
    ]
    call(conn, "push_messages_v2", items)
    req = {"idx": 0, "queue": queue, "batch": count, "leaseId": str(uuid.uuid4())}
    msgs: Msgs = call(conn, "pop_unified_batch", [req])[0]["messages"]
    assert len(msgs) == count
    return msgs


def acks(msgs: Msgs, status: str = "completed", lease: str | None = None) -> list[dict[str, Any]]:
    return [
        {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": status,
         "leaseId": lease or m["leaseId"]}
        for m in msgs
    ]  # fmt: skip


def state(conn: Conn) -> Any:
    """Everything an ack may write: cursors, leases, batches, counters, dead letters."""
    return value(
        conn,
        """SELECT jsonb_build_object(
                  'pc', (SELECT jsonb_agg(to_jsonb(pc) ORDER BY pc.partition_id, pc.consumer_group)
                           FROM queen.partition_consumers pc),
                  'dlq', (SELECT count(*) FROM queen.dead_letter_queue))""",
    )


def both_ways(conn: Conn, items: list[dict[str, Any]]) -> tuple[Any, Any, Any, Any, Any]:
    """(item by item answer, its state, ack_messages_v2's answer, its state, _ack_fast's
    answer), each from the same starting point in one transaction."""
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SAVEPOINT s")
        slow = value(conn, "SELECT queen._ack_items(%s::jsonb, false)::text", json.dumps(items))
        slow_state = state(conn)
        cur.execute("ROLLBACK TO SAVEPOINT s")
        fast = call(conn, "ack_messages_v2", {"acks": items})
        fast_state = state(conn)
        cur.execute("ROLLBACK TO SAVEPOINT s")
        direct = call(conn, "_ack_fast", items)
        cur.execute("ROLLBACK")
    return json.loads(slow), slow_state, fast, fast_state, direct


SHAPES: dict[str, Callable[[Msgs], list[dict[str, Any]]]] = {
    "the whole batch": lambda m: acks(m),
    "its first part": lambda m: acks(m[:4]),
    "some with gaps between": lambda m: acks([m[1], m[4], m[7]]),
    "the last message only": lambda m: acks(m[-1:]),
    "out of order in the request": lambda m: acks(list(reversed(m))),
    "one message": lambda m: acks(m[3:4]),
    "status success": lambda m: acks(m, "success"),
}

DECLINED: dict[str, Callable[[Msgs], list[dict[str, Any]]]] = {
    "a message twice": lambda m: acks(m[:3] + m[1:2]),
    "a nack among them": lambda m: acks(m[:3]) + acks(m[3:4], "failed"),
    "another lease": lambda m: acks(m, lease=str(uuid.uuid4())),
    "no lease": lambda m: [{k: v for k, v in a.items() if k != "leaseId"} for a in acks(m)],
    "an unknown message": lambda m: [*acks(m[:2]), {**acks(m[:1])[0], "transactionId": "nope"}],
    "an unknown status": lambda m: acks(m[:2], "maybe"),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_fast_path_answers_and_stores_as_item_by_item(pg_conn: Conn, shape: str) -> None:
    msgs = popped_batch(pg_conn, f"fast-{uuid.uuid4().hex[:8]}")
    slow, slow_state, fast, fast_state, direct = both_ways(pg_conn, SHAPES[shape](msgs))
    assert direct is not None, "the fast path should take this shape"
    assert fast == slow
    assert fast_state == slow_state


@pytest.mark.parametrize("shape", list(DECLINED))
def test_fast_path_declines_other_shapes(pg_conn: Conn, shape: str) -> None:
    msgs = popped_batch(pg_conn, f"fast-{uuid.uuid4().hex[:8]}")
    slow, slow_state, fast, fast_state, direct = both_ways(pg_conn, DECLINED[shape](msgs))
    assert direct is None
    assert fast == slow
    assert fast_state == slow_state


def test_the_rest_of_a_batch_after_a_first_part(pg_conn: Conn) -> None:
    msgs = popped_batch(pg_conn, f"fast-{uuid.uuid4().hex[:8]}")
    first = call(pg_conn, "ack_messages_v2", {"acks": acks(msgs[:4])})
    assert [r["status"] for r in first] == ["completed"] * 4
    slow, slow_state, fast, fast_state, direct = both_ways(pg_conn, acks(msgs[4:]))
    assert direct is not None
    assert fast == slow
    assert fast_state == slow_state
    assert fast[-1]["leaseReleased"] is True


def test_an_expired_lease_is_declined(pg_conn: Conn) -> None:
    msgs = popped_batch(pg_conn, f"fast-{uuid.uuid4().hex[:8]}")
    value(
        pg_conn,
        "UPDATE queen.partition_consumers SET lease_expires_at = now() - interval '1 second' "
        "WHERE partition_id = %s::uuid RETURNING 1",
        msgs[0]["partitionId"],
    )
    slow, slow_state, fast, fast_state, direct = both_ways(pg_conn, acks(msgs))
    assert direct is None
    assert fast == slow
    assert fast_state == slow_state
    assert {r["error"] for r in fast} == {"Invalid or expired lease"}
