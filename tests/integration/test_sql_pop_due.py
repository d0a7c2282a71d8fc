"""An empty long-poll pop reports when something in its scope becomes available without
another write (`due`: queen._pop_due, schema/functions/29_pop_due.sql): a lease running
out, a retry's wait, a delayedProcessing wait, a windowBuffer; and whether a concurrent
transaction held a candidate (`contended`).

Each expected time is read from what the database stored, after the pop: the pop's own
`dueInMs` counts from its earlier now(), so it lies between that and a little more.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest

from tests.integration.test_sql_queue_core import Conn, ack, configure, pop, push, sql


def qname() -> str:
    return f"due-{uuid.uuid4().hex[:10]}"


def due_pop(conn: Conn, queue: str | None, **extra: Any) -> dict[str, Any]:
    """A long poll's pop (`due`) that finds nothing."""
    res = pop(conn, queue, due=True, **extra)
    assert res["messages"] == [], res
    return res


def ms_until(conn: Conn, expression: str, *args: Any) -> float:
    [(ms,)] = sql(conn, f"SELECT extract(epoch FROM ({expression}) - now()) * 1000", *args)
    return float(ms)


def assert_due(res: dict[str, Any], expected_ms: float) -> None:
    """`dueInMs` counts from the pop's now(), taken before `expected_ms` was read."""
    assert res["dueInMs"] is not None, res
    assert expected_ms <= res["dueInMs"] <= expected_ms + 250, (res["dueInMs"], expected_ms)


def lease_ms(conn: Conn, queue: str) -> float:
    return ms_until(
        conn,
        """SELECT max(pc.lease_expires_at) FROM queen.partition_consumers pc
             JOIN queen.partitions p ON p.id = pc.partition_id
             JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = %s""",
        queue,
    )


def newest_ms(conn: Conn, queue: str, plus_s: int) -> float:
    return ms_until(
        conn,
        """SELECT max(m.created_at) + make_interval(secs => %s) FROM queen.messages m
             JOIN queen.partitions p ON p.id = m.partition_id
             JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = %s""",
        plus_s,
        queue,
    )


def test_a_lease_is_due_when_it_runs_out(pg_conn: Conn) -> None:
    q = qname()
    configure(pg_conn, q, leaseTime=2)
    push(pg_conn, q, ["a"])
    assert pop(pg_conn, q)["messages"]
    res = due_pop(pg_conn, q)
    assert_due(res, lease_ms(pg_conn, q))
    assert 1500 < res["dueInMs"] <= 2100
    assert res["contended"] is False


def test_a_failed_ack_is_due_when_its_retry_wait_ends(pg_conn: Conn) -> None:
    q = qname()
    configure(pg_conn, q, retryDelay=800, retryJitter=0, retryStrategy="fixed")
    push(pg_conn, q, ["a"])
    [msg] = pop(pg_conn, q)["messages"]
    [out] = ack(pg_conn, msg, "failed", error="boom")
    assert out["success"], out
    res = due_pop(pg_conn, q)
    assert_due(
        res,
        ms_until(pg_conn, "SELECT max(retry_available_at) FROM queen.partition_consumers"
                          " WHERE partition_id = %s", msg["partitionId"]),
    )  # fmt: skip
    assert 500 < res["dueInMs"] <= 900


def test_delayed_processing_is_due_when_the_first_pending_message_is(pg_conn: Conn) -> None:
    q = qname()
    configure(pg_conn, q, delayedProcessing=2)
    push(pg_conn, q, ["a"])
    push(pg_conn, q, ["b"])
    res = due_pop(pg_conn, q)
    first = ms_until(
        pg_conn,
        """SELECT min(m.created_at) + interval '2 s' FROM queen.messages m
             JOIN queen.partitions p ON p.id = m.partition_id
             JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = %s""",
        q,
    )
    assert_due(res, first)


def test_a_window_buffer_is_due_when_the_partition_has_been_quiet_for_it(pg_conn: Conn) -> None:
    q = qname()
    configure(pg_conn, q, windowBuffer=2)
    push(pg_conn, q, ["a"])
    assert_due(due_pop(pg_conn, q), newest_ms(pg_conn, q, 2))
    push(pg_conn, q, ["b"])  # a later message moves the window's end
    assert_due(due_pop(pg_conn, q), newest_ms(pg_conn, q, 2))


def test_the_earliest_partition_of_a_wildcard_pop_and_its_group_count(pg_conn: Conn) -> None:
    q = qname()
    configure(pg_conn, q, leaseTime=5, retryDelay=600, retryJitter=0)
    push(pg_conn, q, ["a"], partition="p1")
    push(pg_conn, q, ["b"], partition="p2")
    assert pop(pg_conn, q, "p1")["messages"]
    [held] = pop(pg_conn, q, "p2")["messages"]
    ack(pg_conn, held, "failed", error="boom")
    res = due_pop(pg_conn, q)
    assert 300 < res["dueInMs"] <= 700, res  # p2's retry, before p1's lease
    assert 4000 < due_pop(pg_conn, q, partition="p1")["dueInMs"] <= 5100
    # Another consumer group holds no lease: it gets the messages, there is nothing due.
    assert pop(pg_conn, q, batch=10, group="other", partitions=2)["messages"]


def test_nothing_due_reports_none_and_a_plain_pop_reports_nothing(pg_conn: Conn) -> None:
    q = qname()
    push(pg_conn, q, ["a"])
    res = pop(pg_conn, q)
    assert res["messages"]
    ack(pg_conn, res["messages"][0])
    assert due_pop(pg_conn, q)["dueInMs"] is None  # drained
    never = qname()
    configure(pg_conn, never)
    assert "dueInMs" not in due_pop(pg_conn, never)  # no partition ever had a message
    configure(pg_conn, q, leaseTime=3)
    push(pg_conn, q, ["b"])
    assert pop(pg_conn, q)["messages"]
    plain = pop(pg_conn, q)
    assert "dueInMs" not in plain and "contended" not in plain  # only long polls ask


def test_a_message_stale_by_its_due_time_arms_nothing(pg_conn: Conn) -> None:
    """maxWaitTimeSeconds only removes: a delay that ends after the message went stale
    makes nothing available."""
    q = qname()
    configure(pg_conn, q, delayedProcessing=3, maxWaitTimeSeconds=2)
    push(pg_conn, q, ["a"])
    assert due_pop(pg_conn, q)["dueInMs"] is None
    fresh = qname()
    configure(pg_conn, fresh, delayedProcessing=1, maxWaitTimeSeconds=5)
    push(pg_conn, fresh, ["a"])
    assert due_pop(pg_conn, fresh)["dueInMs"] is not None


@pytest.fixture
def other_conn(pg_conn: Conn) -> Iterator[Conn]:
    conn = psycopg2.connect(pg_conn.dsn)
    try:
        yield conn
    finally:
        conn.close()


def test_a_candidate_held_by_a_concurrent_pop_is_reported_as_contended(
    pg_conn: Conn, other_conn: Conn
) -> None:
    """The other pop's lease is not visible until it commits: the pop says so, so that
    its worker looks again soon and learns the lease's end then."""
    q = qname()
    configure(pg_conn, q, leaseTime=4)
    push(pg_conn, q, ["a"])
    ack(pg_conn, pop(pg_conn, q)["messages"][0])  # the group's cursor row exists
    push(pg_conn, q, ["b"])
    with other_conn.cursor() as cur:  # a pop in a transaction that has not committed yet
        cur.execute(
            "SELECT queen.pop_unified_batch(%s::jsonb)::text",
            (f'[{{"idx": 0, "queue": "{q}", "leaseId": "{uuid.uuid4()}"}}]',),
        )
    res = due_pop(pg_conn, q)
    assert res["contended"] is True
    assert res["dueInMs"] is None
    other_conn.commit()
    res = due_pop(pg_conn, q)
    assert res["contended"] is False
    assert_due(res, lease_ms(pg_conn, q))
