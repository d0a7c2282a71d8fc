"""Queen's SQL API: leases, transaction, forward, configure, seek, groups, lag, channels,
delayed messages and the uuid v7 helpers, against a real PostgreSQL (docs/sql.md)."""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Iterator

import psycopg2
import pytest

from tests.support.sql_api import Listener, SqlFace


@pytest.fixture
def app(migrated_dsn: str) -> Iterator[SqlFace]:
    """An application session that commits every call (autocommit)."""
    face = SqlFace(migrated_dsn, autocommit=True)
    yield face
    face.close()


def qname() -> str:
    return f"su-{uuid.uuid4().hex[:8]}"


def test_renew_extends_a_live_lease_and_refuses_an_unknown_one(app: SqlFace) -> None:
    q = qname()
    app.one("SELECT queen.configure(%s, 10)", q)
    app.produce_one(q, "x")
    [row] = app.consume_one(q)
    expires = app.one("SELECT lease_expires_at FROM queen.partition_consumers")
    renewed = app.one("SELECT queen.renew_one(%s, 120)", row["lease_id"])
    assert renewed > expires + datetime.timedelta(seconds=100)
    unknown = str(uuid.uuid4())
    answers = app.call("renew", [{"leaseId": row["lease_id"], "extendSeconds": 5},
                                 {"leaseId": unknown, "extendSeconds": 5}])  # fmt: skip
    assert answers[0]["success"] is True  # never shorter: the later of the two
    assert datetime.datetime.fromisoformat(answers[0]["expiresAt"]) >= renewed
    assert answers[1]["success"] is False and answers[1]["error"]
    assert app.one("SELECT queen.renew_one(%s)", unknown) is None


def test_a_transaction_is_all_or_none_and_says_so(app: SqlFace) -> None:
    q = qname()
    app.produce_one(q, "first")
    [row] = app.consume_one(q)
    ack = {"type": "ack", "transactionId": row["transaction_id"],
           "partitionId": row["partition_id"], "leaseId": row["lease_id"]}  # fmt: skip
    bad = {**ack, "leaseId": str(uuid.uuid4())}
    push = {"type": "push", "queue": q, "partition": "out", "payload": "next"}
    failed = app.call("transaction", [push, bad])
    assert failed["success"] is False and "lease" in failed["error"].lower()
    assert app.one("SELECT count(*) FROM queen.messages") == 1  # the push went back too
    done = app.call("transaction", [push, ack])
    assert done["success"] is True and uuid.UUID(done["transactionId"]).version == 7
    assert [r["type"] for r in done["results"]] == ["push", "ack"]
    assert done["results"][0]["messageId"] and done["results"][1]["partitionId"]
    assert app.one("SELECT queen.lag(%s)", q) == 1  # "next"; "first" acked
    empty = app.call("transaction", [])
    assert empty["success"] is True and empty["results"] == []


def test_forward_acks_and_pushes_in_one_step_and_answers_the_new_id(app: SqlFace) -> None:
    q, dest = qname(), qname()
    app.produce_one(q, "in")
    [row] = app.consume_one(q)
    args = (row["transaction_id"], row["partition_id"])
    wrong = app.one("SELECT queen.forward(%s, %s::uuid, %s, '__QUEUE_MODE__', %s, '1')",
                    *args, str(uuid.uuid4()), dest)  # fmt: skip
    assert wrong is None and app.one("SELECT queen.depth(%s)", dest) == 0
    new_id = app.one("SELECT queen.forward(%s, %s::uuid, %s, '__QUEUE_MODE__', %s, %s, 'P', 't')",
                     *args, row["lease_id"], dest, json.dumps({"out": 1}))  # fmt: skip
    [fwd] = app.consume_one(dest)
    assert fwd["id"] == new_id and fwd["payload"] == {"out": 1} and fwd["transaction_id"] == "t"
    assert app.one("SELECT queen.lag(%s)", q) == 0


def test_configure_answers_true_and_keeps_what_sql_cannot_set(app: SqlFace) -> None:
    q = qname()
    assert app.one("SELECT queen.configure(%s, 45, 7, true)", q) is True
    assert app.rows("SELECT lease_time, retry_limit, dead_letter_queue FROM queen.queues"
                    " WHERE name = %s", q) == [(45, 7, True)]  # fmt: skip
    app.one("UPDATE queen.queues SET encryption_enabled = true, delayed_processing = 5"
            " WHERE name = %s", q)  # fmt: skip
    assert app.one("SELECT queen.configure(%s)", q) is True
    assert app.rows("SELECT lease_time, retry_limit, delayed_processing, encryption_enabled"
                    " FROM queen.queues WHERE name = %s", q) == [(300, 3, 0, True)]  # fmt: skip
    assert app.one("SELECT queen.configure('')") is False


def test_seek_and_delete_consumer_group(app: SqlFace) -> None:
    q = qname()
    for i in range(3):
        app.produce_one(q, i)
    assert app.one("SELECT queen.lag(%s, 'g')", q) == 3  # a group never seen: everything
    assert app.one("SELECT queen.seek('g', %s)", q) is False  # no target
    assert app.one("SELECT queen.seek('g', %s, true)", q) is True
    assert app.one("SELECT queen.lag(%s, 'g')", q) == 0 and app.consume_one(q, "g") == []
    app.produce_one(q, "after")
    assert app.one("SELECT queen.seek('g', %s, to_timestamp => '2000-01-01')", q) is True
    assert app.one("SELECT queen.lag(%s, 'g')", q) == 4
    assert app.one("SELECT queen.delete_consumer_group('g', %s)", q) is True
    assert app.one("SELECT count(*) FROM queen.partition_consumers WHERE consumer_group = 'g'") == 0
    assert app.one("SELECT queen.delete_consumer_group('g')") is False  # nothing left
    assert app.one("SELECT queen.seek('g', 'no-such-queue', true)") is False


def test_lag_depth_and_has_messages(app: SqlFace) -> None:
    q = qname()
    assert app.one("SELECT queen.has_messages(%s)", q) is False
    for i in range(3):
        app.produce_one(q, i)
    assert app.one("SELECT queen.depth(%s)", q) == 3
    [row] = app.consume_one(q)
    assert app.one("SELECT queen.lag(%s)", q) == 3  # leased ones count
    assert app.one("SELECT queen.has_messages(%s)", q) is False  # its one partition is leased
    assert app.one("SELECT queen.has_messages(%s, 'other')", q) is True
    app.commit_one(row)
    assert app.one("SELECT queen.lag(%s)", q) == 2
    assert app.one("SELECT queen.has_messages(%s)", q) is True
    app.consume_one(q, "late", subscription_mode="new")  # subscribes now, gets nothing
    assert app.one("SELECT queen.lag(%s, 'late')", q) == 0


def test_channel_name_and_notify_at_commit(migrated_dsn: str) -> None:
    q = f"orders.eu-{uuid.uuid4().hex[:6]}"
    app = SqlFace(migrated_dsn)
    channel = app.one("SELECT queen.channel_name(%s)", q)
    assert channel == "queen_" + q.replace(".", "_").replace("-", "_")
    listener = Listener(migrated_dsn, channel)
    try:
        mid = app.one("SELECT queen.produce_notify(%s, '1')", q)
        app.one("SELECT queen.notify(%s, 'hello')", q)
        assert listener.heard(0.2) == []  # nothing before the commit
        app.commit()
        first, second = listener.heard()
        assert json.loads(first)["messageId"] == str(mid) and second == "hello"
        app.one("SELECT queen.produce_one(%s, '2', notify => true)", q)
        app.rollback()
        assert listener.heard(0.2) == []
    finally:
        listener.close()
        app.close()


def test_a_delayed_produce_is_stored_when_its_time_comes(app: SqlFace) -> None:
    q = qname()
    at = app.one("SELECT clock_timestamp() + interval '300 milliseconds'")
    mid, txn = app.rows("SELECT * FROM queen.produce_full(%s, '\"later\"', 'P', 'd-1', "
                        "delay_until => %s)", q, at)[0]  # fmt: skip
    assert txn == "d-1" and app.consume_one(q) == []
    again = app.rows("SELECT * FROM queen.produce_full(%s, '\"twice\"', 'P', 'd-1', "
                     "delay_until => %s)", q, at)  # fmt: skip
    assert again == [(mid, "d-1")]  # the first produce of an id wins, as a push's dedup
    due = app.one("SELECT deliver_at FROM queen.timers")
    assert due - at < datetime.timedelta(milliseconds=50)  # (whole milliseconds, and the call)
    time.sleep(max(0.0, (due - app.one("SELECT clock_timestamp()")).total_seconds()))
    fired = app.one("SELECT queen.timers_fire_v1('{\"limit\": 10}')")  # as a server's firer
    assert fired["fired"] == 1
    [row] = app.consume_one(q)
    assert (row["id"], row["payload"], row["transaction_id"]) == (mid, "later", "d-1")
    now_id = app.one(
        "SELECT message_id FROM queen.produce_full(%s, '1', 'P', delay_until => now())", q
    )
    assert [r["id"] for r in app.consume_one(q, "g2", 5)] == [mid, now_id]  # not later: now


def test_uuid_v7_helpers(app: SqlFace) -> None:
    ids = app.rows("SELECT queen.uuid_generate_v7() FROM generate_series(1, 3000)")
    values = [uuid.UUID(i) for (i,) in ids]
    assert values == sorted(values) and len(set(values)) == 3000
    assert all(v.version == 7 and v.variant == uuid.RFC_4122 for v in values)
    at = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
    low = app.one("SELECT queen.uuid_v7_boundary(%s)", at)
    assert low == "019b7ca9-8f2e-7000-8000-000000000000"
    assert app.one("SELECT queen.uuid_v7_to_timestamptz(%s)", low) == at
    made = app.one("SELECT queen.uuid_generate_v7_at(%s)", at)
    assert made >= low and app.one("SELECT queen.uuid_v7_to_timestamptz(%s)", made) == at


def test_a_batch_function_refuses_what_is_not_an_array_or_object(app: SqlFace) -> None:
    for fn in ("produce", "consume", "commit", "renew", "transaction"):
        with pytest.raises(psycopg2.errors.InvalidParameterValue, match=f"queen.{fn}"):
            app.one(f"SELECT queen.{fn}('5')")
    assert app.call("produce", []) == [] and app.call("consume", []) == []
