"""queen.push_partition_v3's own path for a push of one item into a known partition (issue 41:
three statements instead of push_partition_v2's thirteen), and what it leaves to v2's path:
the same answers, stored rows and counters as the general push, whichever path decided."""

from __future__ import annotations

import json
from typing import Any

from tests.integration.test_push_partition import declinable
from tests.integration.test_sql_queue_core import Conn, configure, push, sql


def _v3(conn: Conn, pid: str, items: list[dict[str, Any]]) -> Any:
    rows = sql(conn, "SELECT queen.push_partition_v3(%s::uuid, %s::text)", pid, json.dumps(items))
    return None if rows[0][0] is None else json.loads(rows[0][0])


def _counters(conn: Conn, pid: str) -> tuple[Any, ...]:
    return sql(
        conn,
        "SELECT next_offset, last_activity FROM queen.partition_counters WHERE partition_id = %s",
        pid,
    )[0]


def _stored(conn: Conn, pid: str) -> list[tuple[Any, ...]]:
    return sql(
        conn,
        "SELECT transaction_id, payload, partition_offset, trace_id::text, producer_sub,"
        " is_encrypted, trace_context FROM queen.messages WHERE partition_id = %s"
        " ORDER BY partition_offset",
        pid,
    )


def test_one_item_is_stored_and_answered_as_the_general_push_does(pg_conn: Conn) -> None:
    pid = push(pg_conn, "pf.one", [0], partition="a")[0]["partition_id"]
    trace = "0af7651916cd43dd8448eb211c80319c"
    context = {"traceparent": f"00-{trace}-b7ad6b7169203331-01"}
    item = {"queue": "pf.one", "partition": "a", "payload": {"k": [1, "x"]},
            "transactionId": "t1", "traceId": "8f0a3c1e-1b2c-4d5e-8f90-a1b2c3d4e5f6",
            "producerSub": "alice", "traceContext": context}  # fmt: skip
    [row] = _v3(pg_conn, pid, [item])
    assert row[0] == "queued" and row[2] == pid and row[4:] == [None, None, None]
    assert row[3] == "8f0a3c1e-1b2c-4d5e-8f90-a1b2c3d4e5f6"
    assert sql(pg_conn, "SELECT id::text FROM queen.messages WHERE transaction_id = 't1'") == [
        (row[1],)
    ]
    assert _stored(pg_conn, pid)[1] == (
        "t1", {"k": [1, "x"]}, 1, "8f0a3c1e-1b2c-4d5e-8f90-a1b2c3d4e5f6", "alice", False, context
    )  # fmt: skip
    assert _counters(pg_conn, pid)[0] == 2
    # without a transactionId: one is made up, stored and answered
    [made] = _v3(pg_conn, pid, [{"queue": "pf.one", "partition": "a", "payload": None}])
    assert made[0] == "queued" and made[6] is not None
    assert _stored(pg_conn, pid)[2][:3] == (made[6], None, 2)
    # the partition's newest message as the pop reads it (ready index, migration 0019)
    assert sql(
        pg_conn, "SELECT last_message_id::text FROM queen.partition_lookup WHERE partition_id = %s",
        pid,
    ) == [(made[1],)]  # fmt: skip


def test_a_stored_transaction_id_answers_duplicate_and_gives_its_offset_back(
    pg_conn: Conn,
) -> None:
    first = push(pg_conn, "pf.dup", [0], partition="a")[0]
    pid = first["partition_id"]
    before = _counters(pg_conn, pid)
    again = {"queue": "pf.dup", "partition": "a", "payload": 9,
             "transactionId": first["transactionId"], "traceId": "not-a-uuid"}  # fmt: skip
    [row] = _v3(pg_conn, pid, [again])
    assert row == ["duplicate", first["message_id"], pid, None, None, None, None]
    assert _counters(pg_conn, pid)[0] == before[0]  # offsets stay dense
    assert len(_stored(pg_conn, pid)) == 1
    [after] = _v3(pg_conn, pid, [{**again, "transactionId": "next"}])
    assert after[0] == "queued" and _stored(pg_conn, pid)[1][2] == 1
    # two items of one transactionId in one request: v2's path, the first one is stored
    two = _v3(pg_conn, pid, [{**again, "transactionId": "x"}, {**again, "transactionId": "x"}])
    assert [r[0] for r in two] == ["queued", "duplicate"] and two[0][1] == two[1][1]


def test_a_timestamp_is_never_before_the_partitions_newest_message(pg_conn: Conn) -> None:
    """The floor read under the partition's lock: a clock behind the partition's newest
    message (another node's, on Citus) must not order the new message before it."""
    pid = push(pg_conn, "pf.floor", [0])[0]["partition_id"]
    sql(
        pg_conn,
        "UPDATE queen.partition_lookup SET last_message_created_at = now() + interval '1 hour'"
        " WHERE partition_id = %s",
        pid,
    )
    [row] = _v3(pg_conn, pid, [{"queue": "pf.floor", "payload": 1, "transactionId": "late"}])
    assert row[0] == "queued"
    assert sql(
        pg_conn,
        "SELECT m.created_at >= l.last_message_created_at FROM queen.messages m"
        " JOIN queen.partition_lookup l ON l.partition_id = m.partition_id"
        " WHERE m.transaction_id = 'late'",
    ) == [(True,)]


def test_what_it_does_not_take_is_declined_or_answered_without_writing(pg_conn: Conn) -> None:
    a, b, capped = declinable(pg_conn, "pf")
    counters = {p: _counters(pg_conn, p) for p in (a, b, capped)}
    messages = sql(pg_conn, "SELECT count(*) FROM queen.messages")
    item = {"queue": "pf.one", "partition": "a", "payload": 1}
    assert _v3(pg_conn, b, [item]) is None  # another partition's id
    assert _v3(pg_conn, capped, [{"queue": "pf.capped", "payload": 1}]) is None  # capped
    assert _v3(pg_conn, "00000000-0000-0000-0000-000000000000", [item]) is None
    assert _v3(pg_conn, a, [{"payload": 1}]) is None  # no queue named
    assert sql(pg_conn, "SELECT count(*) FROM queen.messages") == messages
    assert {p: _counters(pg_conn, p) for p in counters} == counters  # not even last_activity


def test_an_encrypted_queue_refuses_plain_text_and_takes_encrypted_items(pg_conn: Conn) -> None:
    configure(pg_conn, "pf.enc", encryptionEnabled=True)
    pid = push(pg_conn, "pf.enc", [{"enc": 0}], isEncrypted=True)[0]["partition_id"]
    before = _counters(pg_conn, pid)
    [plain] = _v3(pg_conn, pid, [{"queue": "pf.enc", "payload": 1, "transactionId": "p"}])
    assert (plain[0], plain[5]) == ("failed", "encryption_key_missing")
    assert _counters(pg_conn, pid)[0] == before[0] and len(_stored(pg_conn, pid)) == 1
    sealed = {"queue": "pf.enc", "payload": {"enc": 1}, "transactionId": "s", "isEncrypted": True}
    [row] = _v3(pg_conn, pid, [sealed])
    assert row[0] == "queued" and _stored(pg_conn, pid)[1][5] is True
