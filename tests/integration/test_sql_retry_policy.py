"""The retry policy and failure classes in the stored functions (docs/retries.md).

The schedule is the pure `queen.retry_delay_ms`, checked with fixed random values; the ack
path is checked from what it stored (retry_available_at against the ack's own transaction
time), never by waiting: a retry's wait is skipped by moving retry_available_at back.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.integration.test_sql_queue_core import (
    Conn,
    ack,
    call,
    configure,
    consumer_row,
    listen,
    notifications,
    pop,
    push,
    sql,
)

BASE, CAP = 1000, 60_000


def delay(
    conn: Conn,
    strategy: str | None,
    attempt: int | None,
    *,
    base: int | None = BASE,
    cap: int | None = CAP,
    jitter: float | None = 0.0,
    rand: float | None = 0.0,
) -> int:
    [(ms,)] = sql(
        conn,
        "SELECT queen.retry_delay_ms(%s, %s, %s, %s::real, %s, %s)",
        strategy,
        base,
        cap,
        jitter,
        attempt,
        rand,
    )
    return int(ms)


def schedule(conn: Conn, strategy: str, **kw: Any) -> list[int]:
    return [delay(conn, strategy, n, **kw) for n in range(1, 7)]


def skip_wait(conn: Conn) -> None:
    """The retry's wait is over (as if the time had passed)."""
    sql(conn, "UPDATE queen.partition_consumers SET retry_available_at = now() - interval '1 ms'")


def fail(conn: Conn, msg: dict[str, Any], error: str | None = None, **extra: Any) -> dict[str, Any]:
    """A `failed` ack of one message with the extra item fields (errorType, retryable)."""
    item = {
        "transactionId": msg["transactionId"],
        "partitionId": msg["partitionId"],
        "leaseId": msg["leaseId"],
        "consumerGroup": msg.get("consumerGroup"),
        "status": "failed",
        "error": error,
        **extra,
    }
    [out] = call(conn, "ack_messages_v2", {"acks": [item]})
    assert out["success"], out
    return dict(out)


def dlq_rows(conn: Conn) -> list[tuple[Any, ...]]:
    return sql(
        conn,
        "SELECT error_message, error_type, retry_count, attempts FROM queen.dead_letter_queue",
    )


def traces(conn: Conn) -> list[tuple[str, dict[str, Any]]]:
    return [
        (str(e), d)
        for e, d in sql(
            conn, "SELECT event_type, data FROM queen.message_traces ORDER BY created_at, id"
        )
    ]


# --------------------------------------------------------------------------- the schedule


def test_schedule_of_each_strategy(pg_conn: Conn) -> None:
    assert schedule(pg_conn, "fixed") == [1000] * 6
    assert schedule(pg_conn, "exponential") == [1000, 2000, 4000, 8000, 16000, 32000]
    assert schedule(pg_conn, "linear") == [1000, 2000, 3000, 4000, 5000, 6000]


def test_growing_schedules_are_capped(pg_conn: Conn) -> None:
    assert schedule(pg_conn, "exponential", cap=5000) == [1000, 2000, 4000, 5000, 5000, 5000]
    assert schedule(pg_conn, "linear", cap=2500) == [1000, 2000, 2500, 2500, 2500, 2500]
    # A cap below retryDelay never shortens retryDelay itself.
    assert schedule(pg_conn, "exponential", cap=10) == [1000] * 6
    assert schedule(pg_conn, "fixed", cap=10) == [1000] * 6


@pytest.mark.parametrize("strategy", ["fixed", "exponential", "linear"])
def test_jitter_adds_up_to_its_share_and_never_less(pg_conn: Conn, strategy: str) -> None:
    plain = schedule(pg_conn, strategy, cap=5000)
    assert schedule(pg_conn, strategy, cap=5000, jitter=0.1, rand=0.0) == plain
    assert schedule(pg_conn, strategy, cap=5000, jitter=0.1, rand=1.0) == [
        d + d // 10 for d in plain
    ]
    for rand in (0.001, 0.25, 0.5, 0.75, 0.999):
        jittered = schedule(pg_conn, strategy, cap=5000, jitter=0.3, rand=rand)
        assert all(d <= j <= d + d * 3 // 10 for d, j in zip(plain, jittered, strict=True))
    # The cap applies before the jitter: capped waiters still spread out.
    assert delay(pg_conn, strategy, 6, cap=5000, jitter=0.2, rand=1.0) == plain[5] * 6 // 5


def test_schedule_guards_overflow_and_clamps_inputs(pg_conn: Conn) -> None:
    top = 2**31 - 1
    assert delay(pg_conn, "exponential", 1000, cap=top) == top, "2^999 never computed"
    assert delay(pg_conn, "exponential", top, base=top, cap=top, jitter=1, rand=1) == top
    assert delay(pg_conn, "linear", top, base=top, cap=top) == top
    assert delay(pg_conn, "exponential", 32, base=1, cap=top) == 2**31 - 1
    assert delay(pg_conn, "exponential", 31, base=1, cap=top) == 2**30
    assert delay(pg_conn, "exponential", 0) == delay(pg_conn, "exponential", -5) == 1000
    assert delay(pg_conn, "exponential", 3, base=0) == 0
    assert delay(pg_conn, "fixed", 1, jitter=7, rand=3) == 2000, "jitter and rand clamped to 1"
    assert delay(pg_conn, "fixed", 1, jitter=-1, rand=-1) == 1000
    assert delay(pg_conn, None, 4) == delay(pg_conn, "nonsense", 4) == 1000, "fixed"
    assert delay(pg_conn, "linear", None, base=None, cap=None, jitter=None, rand=None) == 0


# --------------------------------------------------------------------------- the ack path


def scheduled_wait_ms(conn: Conn) -> float:
    """retry_available_at minus the ack's own transaction time (its trace's created_at)."""
    [(ms,)] = sql(
        conn,
        """SELECT extract(epoch FROM pc.retry_available_at - t.created_at) * 1000
             FROM queen.partition_consumers pc,
                  LATERAL (SELECT created_at FROM queen.message_traces
                            ORDER BY created_at DESC LIMIT 1) t""",
    )
    return float(ms)


def test_failed_ack_waits_the_policy_delay_before_redelivery(pg_conn: Conn) -> None:
    configure(
        pg_conn,
        "rp",
        retryLimit=5,
        retryDelay=1000,
        retryStrategy="exponential",
        retryDelayMax=60_000,
        retryJitter=0.5,
    )
    push(pg_conn, "rp", ["x"])
    for attempt, base in ((1, 1000), (2, 2000), (3, 4000)):
        [msg] = pop(pg_conn, "rp")["messages"]
        assert msg["retryCount"] == attempt - 1
        out = fail(pg_conn, msg, f"boom {attempt}")
        assert out["status"] == "failed_retry" and out["leaseReleased"] is True
        waited = scheduled_wait_ms(pg_conn)
        assert base <= waited <= base * 1.5, (attempt, waited)
        assert out["retryDelayMs"] == round(waited)
        assert out["nextAttemptAt"].endswith("Z")
        assert pop(pg_conn, "rp")["messages"] == [], "not visible before its delay"
        assert pop(pg_conn, "rp", "Default")["messages"] == []
        skip_wait(pg_conn)
    [again] = pop(pg_conn, "rp")["messages"]
    assert again["retryCount"] == 3


def test_fixed_is_the_default_and_a_zero_delay_retries_at_once(pg_conn: Conn) -> None:
    configure(pg_conn, "fx", retryDelay=200, retryJitter=0)
    push(pg_conn, "fx", ["x"])
    for _ in range(2):
        fail(pg_conn, pop(pg_conn, "fx")["messages"][0])
        assert scheduled_wait_ms(pg_conn) == 200
        skip_wait(pg_conn)
    configure(pg_conn, "zero", retryStrategy="exponential")
    push(pg_conn, "zero", ["y"])
    out = fail(pg_conn, pop(pg_conn, "zero")["messages"][0])
    assert out["retryDelayMs"] == 0
    assert consumer_row(pg_conn, out_pid(pg_conn, "zero"))["retry_available_at"] is None
    assert [m["retryCount"] for m in pop(pg_conn, "zero")["messages"]] == [1]


def out_pid(conn: Conn, queue: str) -> str:
    [(pid,)] = sql(
        conn,
        "SELECT p.id::text FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id"
        " WHERE q.name = %s",
        queue,
    )
    return str(pid)


@pytest.mark.parametrize(
    "fields",
    [
        {"retryable": False},
        {"retryable": False, "errorType": "network"},
        {"errorType": "validation"},
        {"errorType": " Validation "},
    ],
)
def test_non_retryable_failure_goes_to_the_dlq_at_once(
    pg_conn: Conn, fields: dict[str, Any]
) -> None:
    configure(pg_conn, "nr", retryLimit=5, retryDelay=1000)
    push(pg_conn, "nr", ["bad", "next"])
    [msg] = pop(pg_conn, "nr")["messages"]
    out = fail(pg_conn, msg, "field x is missing", **fields)
    assert (out["status"], out["dlq"]) == ("failed_dlq", True)
    assert "retryDelayMs" not in out
    [(error, etype, retries, attempts)] = dlq_rows(pg_conn)
    assert (error, etype, retries) == ("field x is missing", fields.get("errorType"), 0)
    assert [(a["attempt"], a["error"], a["errorType"]) for a in attempts] == [
        (1, "field x is missing", fields.get("errorType"))
    ]
    assert "delayMs" not in attempts[0] and attempts[0]["failedAt"].endswith("Z")
    [(event, data)] = traces(pg_conn)
    assert event == "dead_lettered"
    assert data == {
        "attempt": 1,
        "retryCount": 0,
        "reason": "non_retryable",
        "error": "field x is missing",
        "errorType": fields.get("errorType"),
    }
    assert [m["data"] for m in pop(pg_conn, "nr")["messages"]] == ["next"], "cursor moved on"


def test_explicit_retryable_wins_over_a_validation_type(pg_conn: Conn) -> None:
    configure(pg_conn, "rv", retryLimit=1)
    push(pg_conn, "rv", ["x"])
    out = fail(
        pg_conn, pop(pg_conn, "rv")["messages"][0], "e", errorType="validation", retryable=True
    )
    assert out["status"] == "failed_retry"
    assert dlq_rows(pg_conn) == []
    # A non-retryable failure without an error text gets a reason of its own.
    out = fail(pg_conn, pop(pg_conn, "rv")["messages"][0], retryable=False)
    assert out["status"] == "failed_dlq"
    [(error, _, retries, attempts)] = dlq_rows(pg_conn)
    assert (error, retries, len(attempts)) == ("Non-retryable failure", 1, 2)


def test_attempt_history_of_two_retries_then_the_dlq(pg_conn: Conn) -> None:
    configure(pg_conn, "hist", retryLimit=2, retryDelay=100, retryStrategy="linear", retryJitter=0)
    push(pg_conn, "hist", ["x"])
    statuses = []
    for n in (1, 2, 3):
        [msg] = pop(pg_conn, "hist")["messages"]
        statuses.append(fail(pg_conn, msg, f"timeout {n}", errorType="timeout")["status"])
        if n < 3:
            history = consumer_row(pg_conn, msg["partitionId"])["retry_history"]
            assert [(a["attempt"], a["delayMs"]) for a in history] == [
                (k, 100 * k) for k in range(1, n + 1)
            ]
            skip_wait(pg_conn)
    assert statuses == ["failed_retry", "failed_retry", "failed_dlq"]
    [(error, etype, retries, attempts)] = dlq_rows(pg_conn)
    assert (error, etype, retries) == ("timeout 3", "timeout", 2)
    assert [(a["attempt"], a["error"], a["errorType"], a.get("delayMs")) for a in attempts] == [
        (1, "timeout 1", "timeout", 100),
        (2, "timeout 2", "timeout", 200),
        (3, "timeout 3", "timeout", None),
    ]
    assert all(a["failedAt"].endswith("Z") for a in attempts)
    assert [a["availableAt"] > a["failedAt"] for a in attempts[:2]] == [True, True]
    row = consumer_row(pg_conn, msg["partitionId"])
    assert (row["retry_message_id"], row["retry_count"], row["retry_history"]) == (None, 0, None)
    events = traces(pg_conn)
    assert [e for e, _ in events] == ["retry_scheduled", "retry_scheduled", "dead_lettered"]
    first = events[0][1]
    assert {k: first[k] for k in ("attempt", "delayMs", "error", "errorType", "strategy")} == {
        "attempt": 1,
        "delayMs": 100,
        "error": "timeout 1",
        "errorType": "timeout",
        "strategy": "linear",
    }
    assert first["availableAt"] == attempts[0]["availableAt"]
    assert events[2][1]["reason"] == "retries_exhausted" and events[2][1]["retryCount"] == 2


def test_history_resets_when_the_retried_message_completes(pg_conn: Conn) -> None:
    configure(pg_conn, "ok", retryLimit=3)
    push(pg_conn, "ok", ["x", "y"])
    fail(pg_conn, pop(pg_conn, "ok")["messages"][0], "once")
    [msg] = pop(pg_conn, "ok")["messages"]
    assert consumer_row(pg_conn, msg["partitionId"])["retry_history"] is not None
    ack(pg_conn, msg)
    row = consumer_row(pg_conn, msg["partitionId"])
    assert (row["retry_message_id"], row["retry_history"]) == (None, None)
    # The next message fails with a history of its own.
    fail(pg_conn, pop(pg_conn, "ok")["messages"][0], "y failed")
    history = consumer_row(pg_conn, msg["partitionId"])["retry_history"]
    assert [(a["attempt"], a["error"]) for a in history] == [(1, "y failed")]


def test_successful_acks_write_no_trace_and_no_history(pg_conn: Conn) -> None:
    push(pg_conn, "fine", [1, 2])
    res = pop(pg_conn, "fine", batch=2)
    assert all(r["status"] == "completed" for r in ack(pg_conn, res["messages"]))
    assert traces(pg_conn) == []
    assert consumer_row(pg_conn, res["messages"][0]["partitionId"])["retry_history"] is None


def test_dlq_status_and_transactions_keep_type_and_attempts(pg_conn: Conn) -> None:
    configure(pg_conn, "dq", retryLimit=5)
    push(pg_conn, "dq", ["a", "b"])
    [a] = pop(pg_conn, "dq")["messages"]
    [out] = ack(pg_conn, a, "dlq", error="poison")
    assert out["status"] == "failed_dlq"
    [b] = pop(pg_conn, "dq")["messages"]
    tx = call(
        pg_conn,
        "execute_transaction_v2",
        {
            "operations": [
                {
                    "type": "ack",
                    "transactionId": b["transactionId"],
                    "partitionId": b["partitionId"],
                    "status": "failed",
                    "error": "in tx",
                    "errorType": "network",
                    "retryable": True,
                }
            ]
        },
    )
    assert tx["success"] is True and tx["results"][0]["dlq"] is True, tx
    rows = sql(
        pg_conn,
        "SELECT m.payload, d.error_message, d.error_type, jsonb_array_length(d.attempts)"
        " FROM queen.dead_letter_queue d JOIN queen.messages m ON m.id = d.message_id"
        " ORDER BY m.id",
    )
    assert rows == [("a", "poison", None, 1), ("b", "in tx", "network", 1)]
    assert [d["reason"] for e, d in traces(pg_conn)] == ["dlq", "transaction"]


def test_history_keeps_the_last_hundred_attempts(pg_conn: Conn) -> None:
    configure(pg_conn, "many", retryLimit=1000)
    push(pg_conn, "many", ["x"])
    [msg] = pop(pg_conn, "many")["messages"]
    fail(pg_conn, msg, "first")
    long = [{"attempt": n, "error": f"e{n}"} for n in range(1, 101)]
    sql(
        pg_conn,
        "UPDATE queen.partition_consumers SET retry_history = %s::jsonb, retry_count = 100",
        json.dumps(long),
    )
    fail(pg_conn, pop(pg_conn, "many")["messages"][0], "e101")
    history = consumer_row(pg_conn, msg["partitionId"])["retry_history"]
    assert len(history) == 100
    assert (history[0]["attempt"], history[-1]["attempt"], history[-1]["error"]) == (2, 101, "e101")


def test_free_notification_carries_the_retry_wait(pg_conn: Conn, migrated_dsn: str) -> None:
    configure(pg_conn, "nw.t", retryDelay=5000, retryJitter=0)
    configure(pg_conn, "now.t")
    push(pg_conn, "nw.t", ["x"])
    push(pg_conn, "now.t", ["y"])
    waiting, immediate = pop(pg_conn, "nw.t")["messages"][0], pop(pg_conn, "now.t")["messages"][0]
    listener = listen(migrated_dsn)
    try:
        fail(pg_conn, waiting)
        fail(pg_conn, immediate)
        got: dict[str, dict[str, Any]] = {}
        while len(got) < 2:  # both were committed; they may arrive in two reads
            batch = notifications(listener, wait=5.0)
            assert batch, f"missing notifications, got {got}"
            got.update((n["queue"], n) for n in batch)
    finally:
        listener.close()
    assert got["nw.t"]["kind"] == "free" and got["nw.t"]["delayMs"] == 5000
    assert "delayMs" not in got["now.t"], "no wait: woken at once"


def test_message_detail_states_show_the_attempts(pg_conn: Conn) -> None:
    configure(pg_conn, "st", retryLimit=1, retryDelay=700, retryJitter=0)
    push(pg_conn, "st", ["x"])
    [msg] = pop(pg_conn, "st")["messages"]
    fail(pg_conn, msg, "first", errorType="network")
    state_sql = """SELECT s.status, s.attempt, s.last_delay_ms, s.next_attempt_at - t.created_at,
                          s.last_error, s.error_type, jsonb_array_length(s.attempts)
                     FROM queen.messages m,
                          LATERAL queen._message_states(m.id, m.partition_id, m.created_at) s,
                          LATERAL (SELECT created_at FROM queen.message_traces
                                    ORDER BY created_at DESC LIMIT 1) t"""
    assert sql(pg_conn, state_sql) == [
        ("pending", 1, 700, timedelta(milliseconds=700), "first", "network", 1)
    ]
    skip_wait(pg_conn)
    fail(pg_conn, pop(pg_conn, "st")["messages"][0], "second", errorType="validation")
    [row] = sql(pg_conn, state_sql)
    assert (row[0], row[1], row[2], row[3], row[4], row[5], row[6]) == (
        "dead_letter",
        2,
        700,
        None,
        "second",
        "validation",
        2,
    )
