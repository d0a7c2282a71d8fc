"""The compact push answer: queen.push_messages_v3 plus QueueStore's expansion of it
(queue/store.expand_push_results) gives exactly the objects queen.push_messages_v2 answers.

Both run on the same state: v2 inside a savepoint that is rolled back, then v3, with the
message id sequence put back in between so that both draw the same ids. Only the
transactionIds the database generates (items without one) differ between the two runs.
"""

from __future__ import annotations

import uuid
from typing import Any

from queen_threads.db import Database
from queen_threads.queue.store import QueueStore, expand_push_results
from tests.integration.test_sql_queue_core import Conn, call, configure, push, sql

GENERATED = "<generated>"


def _seed(conn: Conn) -> None:
    """Every queue and partition the items name exists already (a partition created in the
    rolled-back savepoint would get another id the second time)."""
    configure(conn, "enc", encryptionEnabled=True)
    configure(conn, "cap", maxSize=2)
    assert [r["status"] for r in push(conn, "cap", [1, 2])] == ["queued", "queued"]
    call(conn, "push_messages_v2", [{"queue": "enc", "transactionId": "s", "isEncrypted": True}])
    call(
        conn,
        "push_messages_v2",
        [
            {"queue": "plain", "payload": "seed", "transactionId": "stored-1"},
            {"queue": "plain", "partition": "p2", "payload": "seed", "transactionId": "s2"},
        ],
    )


STORED = """
SELECT id, transaction_id, partition_id::text, payload, trace_id::text, producer_sub,
       is_encrypted
  FROM queen.messages WHERE id > %s ORDER BY id
"""


def _stored_both(conn: Conn, items: list[dict[str, Any]]) -> tuple[Any, Any, Any, Any]:
    """(v2's answer, v2's stored rows, v3's answer, v3's stored rows) on the same state."""
    [(floor,)] = sql(conn, "SELECT coalesce(max(id), 0) FROM queen.messages")
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SELECT pg_get_serial_sequence('queen.messages', 'id')")
        [(seq,)] = cur.fetchall()
        cur.execute(f"SELECT last_value, is_called FROM {seq}")
        [(last, called)] = cur.fetchall()
        cur.execute("SAVEPOINT before_v2")
        v2 = call(conn, "push_messages_v2", items)
        cur.execute(STORED, (floor,))
        v2_rows = cur.fetchall()
        cur.execute("ROLLBACK TO SAVEPOINT before_v2")
        cur.execute("SELECT setval(%s, %s, %s)", (seq, last, called))
        v3 = call(conn, "push_messages_v3", items)
        cur.execute(STORED, (floor,))
        v3_rows = cur.fetchall()
        cur.execute("COMMIT")
    return v2, v2_rows, v3, v3_rows


def _both(conn: Conn, items: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """(v2's answer, v3's answer) to the same items on the same state; v3's is kept."""
    v2, _, v3, _ = _stored_both(conn, items)
    return v2, v3


def _generated(results: list[dict[str, Any]], indexes: list[int]) -> list[dict[str, Any]]:
    """The results with the generated transactionIds (checked first) replaced by a marker."""
    out = [dict(r) for r in results]
    for i in indexes:
        assert out[i]["transaction_id"] == out[i]["transactionId"]
        uuid.UUID(out[i]["transactionId"])
        out[i]["transaction_id"] = out[i]["transactionId"] = GENERATED
    return out


def test_v3_expanded_equals_v2(pg_conn: Conn) -> None:
    _seed(pg_conn)
    trace = str(uuid.uuid4())
    items: list[dict[str, Any]] = [
        {"queue": "plain", "payload": {"n": 0}, "transactionId": "a"},
        {"queue": "plain", "partition": "p2", "payload": 1, "transactionId": "b"},
        {"queue": "plain", "payload": "in-request duplicate", "transactionId": "a"},
        {"queue": "plain", "payload": "stored duplicate", "transactionId": "stored-1"},
        {"queue": "plain", "payload": "no transactionId"},
        {"queue": "plain", "payload": "null transactionId", "transactionId": None},
        {"queue": "plain", "payload": "traced", "transactionId": "t1", "traceId": trace},
        {"queue": "plain", "payload": "bad trace", "transactionId": "t2", "traceId": "nope"},
        {"queue": "enc", "payload": "plain text", "transactionId": "e1"},
        {"queue": "cap", "payload": "no room", "transactionId": "c1"},
        {"queue": "", "payload": "no name", "transactionId": "n1"},
        {"payload": "no queue", "transactionId": "n2"},
        {"queue": "plain", "partition": "p2", "transactionId": "a"},
        {"queue": "plain", "payload": "stored again", "transactionId": "stored-1"},
        {"queue": "plain", "payload": "third of a", "transactionId": "a"},
        {"queue": "enc", "payload": "refused twice", "transactionId": "e1"},
    ]
    generated = [4, 5]
    v2, v3 = _both(pg_conn, items)
    expanded = expand_push_results(items, v3)

    assert [r["status"] for r in v2] == [
        "queued", "queued", "duplicate", "duplicate", "queued", "queued", "queued", "queued",
        "failed", "failed", "failed", "failed", "queued", "duplicate", "duplicate", "failed",
    ]  # fmt: skip
    assert [r.get("reason") for r in v2 if r["status"] == "failed"] == [
        "encryption_key_missing",
        "queue_full",
        "queue_required",
        "queue_required",
        "encryption_key_missing",
    ]
    assert v2[2]["message_id"] == v2[14]["message_id"] == v2[0]["message_id"]
    assert v2[6]["trace_id"] == trace and v2[7]["trace_id"] is None
    assert _generated(expanded, generated) == _generated(v2, generated)
    assert [list(r) for r in expanded] == [list(r) for r in v2]  # same keys, same order

    # v3 is what stayed: its ids are the stored ones, generated transactionIds included.
    for r in expanded:
        if r["status"] == "queued":
            rows = sql(
                pg_conn,
                "SELECT transaction_id, partition_id::text FROM queen.messages WHERE id = %s",
                int(r["message_id"]),
            )
            assert rows == [(r["transactionId"], r["partition_id"])]


def test_v3_compact_rows(pg_conn: Conn) -> None:
    configure(pg_conn, "cap1", maxSize=1)
    items = [
        {"queue": "cap1", "payload": 1, "transactionId": "x"},
        {"queue": "cap1", "payload": 2, "transactionId": "y"},
        {"queue": "free", "payload": 3},
    ]
    rows = call(pg_conn, "push_messages_v3", items)
    assert [len(r) for r in rows] == [7, 7, 7]
    assert [r[0] for r in rows] == ["failed", "failed", "queued"]
    assert rows[0][1] is None and rows[0][3] is None  # no message, no trace
    uuid.UUID(rows[0][2])  # its partition exists all the same
    assert rows[0][5] == "queue_full" and "maximum size" in rows[0][4]
    assert rows[0][6] is None and rows[1][6] is None
    assert rows[2][4] is None and rows[2][5] is None
    uuid.UUID(rows[2][6])
    assert call(pg_conn, "push_messages_v3", []) == []
    [row] = call(pg_conn, "push_messages_v3", {"items": [{"queue": "free", "payload": 4}]})
    assert row[0] == "queued"


def test_store_push_expands(database: Database) -> None:
    items = [
        {"queue": "st", "payload": 1, "transactionId": "k1"},
        {"queue": "st", "payload": 2, "transactionId": "k1"},
        {"queue": "st", "partition": "two", "payload": 3},
    ]
    res = QueueStore(database).push(items)
    assert [r["index"] for r in res] == [0, 1, 2]
    assert [r["status"] for r in res] == ["queued", "duplicate", "queued"]
    assert [r["queueName"] for r in res] == ["st"] * 3
    assert res[1]["message_id"] == res[0]["message_id"]
    assert res[0]["transactionId"] == res[1]["transaction_id"] == "k1"
    uuid.UUID(res[2]["transactionId"])
    assert all("error" not in r and "reason" not in r for r in res)


def test_fast_path_answers_and_stores_what_the_general_path_does(pg_conn: Conn) -> None:
    """Every item bound for an existing partition of a plain queue: v3 takes the fast path
    (queen._push_items), whose answer and stored rows must be v2's (the general path)."""
    call(
        pg_conn,
        "push_messages_v2",
        [
            {"queue": "fast", "payload": "seed", "transactionId": "seed-1"},
            {"queue": "fast", "partition": "p 2", "payload": "seed", "transactionId": "seed-2"},
            {"queue": "fast.other", "payload": "seed", "transactionId": "seed-3"},
        ],
    )
    trace = str(uuid.uuid4())
    items: list[dict[str, Any]] = [
        {"queue": "fast", "payload": {"n": 0}, "transactionId": "a"},
        {"queue": "fast", "partition": "p 2", "payload": [1, 2], "transactionId": "a"},
        {"queue": "fast.other", "partition": "", "payload": None, "transactionId": "a"},
        {"queue": "fast", "payload": "no transactionId"},
        {"queue": "fast", "payload": "null transactionId", "transactionId": None},
        {"queue": "fast", "transactionId": "no payload"},
        {"queue": "fast", "payload": "traced", "transactionId": "t1", "traceId": trace},
        {"queue": "fast", "payload": "bad trace", "transactionId": "t2", "traceId": "nope"},
        {"queue": "fast", "payload": "sealed", "transactionId": "e1", "isEncrypted": True},
        {"queue": "fast", "payload": "by", "transactionId": "s1", "producerSub": "alice"},
        {"queue": "fast", "payload": "anon", "transactionId": "s2", "producerSub": ""},
    ]
    generated = [3, 4]
    v2, v2_rows, v3, v3_rows = _stored_both(pg_conn, items)
    assert [r["status"] for r in v2] == ["queued"] * len(items)
    expanded = expand_push_results(items, v3)
    assert _generated(expanded, generated) == _generated(v2, generated)
    assert len(v3_rows) == len(items)
    # Same rows, ids in input order; only the generated transactionIds differ.
    assert [int(r["message_id"]) for r in expanded] == [row[0] for row in v3_rows]
    assert [row[:1] + row[2:] for row in v3_rows] == [row[:1] + row[2:] for row in v2_rows]
    assert [row[1] for i, row in enumerate(v3_rows) if i not in generated] == [
        item["transactionId"] for i, item in enumerate(items) if i not in generated
    ]
    # One timestamp for the request, after each partition's newest message before it.
    stamps = sql(
        pg_conn,
        """SELECT m.created_at, (SELECT max(o.created_at) FROM queen.messages o
                                   WHERE o.partition_id = m.partition_id AND o.id < %s)
             FROM queen.messages m WHERE m.id >= %s""",
        v3_rows[0][0],
        v3_rows[0][0],
    )
    assert len({s for s, _ in stamps}) == 1
    assert all(before is None or s >= before for s, before in stamps)


def test_fast_path_duplicates_fall_back_to_the_general_path(pg_conn: Conn) -> None:
    """A duplicate makes the fast path's INSERT fail; the push runs again on the general
    path and answers it, storing the rest."""
    assert call(pg_conn, "push_messages_v3", [{"queue": "fd", "transactionId": "k"}])[0][0] == (
        "queued"
    )
    rows = call(
        pg_conn,
        "push_messages_v3",
        [
            {"queue": "fd", "payload": 1, "transactionId": "new"},
            {"queue": "fd", "payload": 2, "transactionId": "new"},
            {"queue": "fd", "payload": 3, "transactionId": "k"},
            {"queue": "fd", "payload": 4, "transactionId": "newer"},
        ],
    )
    assert [r[0] for r in rows] == ["queued", "duplicate", "duplicate", "queued"]
    assert rows[1][1] == rows[0][1]
    assert sql(
        pg_conn,
        """SELECT m.transaction_id, m.payload FROM queen.messages m
             JOIN queen.partitions p ON p.id = m.partition_id
             JOIN queen.queues q ON q.id = p.queue_id
            WHERE q.name = 'fd' ORDER BY m.id""",
    ) == [("k", None), ("new", 1), ("newer", 4)]
