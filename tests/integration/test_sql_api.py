"""Queen's SQL API and the HTTP face on one queue (docs/sql.md): what is produced from SQL is
popped over HTTP and the reverse, with one id per message, the same order, dedup,
leases, retries and dead letters; everything inside the caller's transaction."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import falcon.testing
import psycopg2
import pytest

from queen_threads.app import create_app
from queen_threads.runtime import Runtime
from tests.support.sql_api import SqlFace


@pytest.fixture
def api(make_runtime: Callable[..., Runtime]) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_app(make_runtime()))


@pytest.fixture
def app(migrated_dsn: str) -> Iterator[SqlFace]:
    """The application's session, in a transaction until it commits."""
    face = SqlFace(migrated_dsn)
    yield face
    face.close()


def qname() -> str:
    return f"sq-{uuid.uuid4().hex[:8]}"


def http_push(
    api: falcon.testing.TestClient, queue: str, *payloads: Any, partition: str = "Default",
    txn: str | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    items = [{"queue": queue, "partition": partition, "payload": p,
              "transactionId": txn or str(uuid.uuid4())} for p in payloads]  # fmt: skip
    r = api.simulate_post("/api/v1/push", json={"items": items})
    assert r.status_code == 201, r.text
    return list(r.json)


def http_pop(api: falcon.testing.TestClient, queue: str, **params: Any) -> list[dict[str, Any]]:
    r = api.simulate_get(f"/api/v1/pop/queue/{queue}", params={"batch": "10", **params})
    assert r.status_code in (200, 204), r.text
    return list(r.json["messages"]) if r.status_code == 200 else []


def http_ack(api: falcon.testing.TestClient, message: dict[str, Any], **fields: Any) -> Any:
    body = {"transactionId": message["transactionId"], "partitionId": message["partitionId"],
            "leaseId": message["leaseId"], "status": "completed", **fields}  # fmt: skip
    return api.simulate_post("/api/v1/ack", json=body).json


def test_sql_produced_messages_are_popped_over_http_in_order_with_their_ids(
    app: SqlFace, api: falcon.testing.TestClient
) -> None:
    q = qname()
    ids = [app.produce_one(q, {"n": i}, "P", f"t{i}") for i in range(3)]
    answer = app.call("produce", [{"queue": q, "partition": "P", "payload": {"n": 3}}])
    app.commit()
    assert answer[0]["status"] == "queued" and int(answer[0]["message_id"]) > ids[-1]
    messages = http_pop(api, q)
    assert [m["data"] for m in messages] == [{"n": i} for i in range(4)]
    assert [int(m["id"]) for m in messages] == [*ids, int(answer[0]["message_id"])]
    assert [m["transactionId"] for m in messages[:3]] == ["t0", "t1", "t2"]
    assert messages[3]["transactionId"] == answer[0]["transaction_id"]


def test_a_produce_across_partitions_stores_each_item_where_it_names(
    app: SqlFace, api: falcon.testing.TestClient
) -> None:
    """The first item's partition exists (the push by its id is tried first and declines):
    every item still lands in its own partition, in order, none twice."""
    q = qname()
    app.produce_one(q, "seed", "A")
    items = [{"queue": q, "partition": p, "payload": f"{p}{i}"}
             for i, p in enumerate(["A", "B", "A", "", "B"])]  # fmt: skip
    answer = app.call("produce", items)
    app.commit()
    assert [a["status"] for a in answer] == ["queued"] * 5
    by_part = {p: [m["data"] for m in http_pop(api, f"{q}/partition/{p}")] for p in "AB"}
    assert by_part == {"A": ["seed", "A0", "A2"], "B": ["B1", "B4"]}
    assert [m["data"] for m in http_pop(api, q)] == ["3"]  # "" is Default, as a push says


def test_http_pushed_messages_are_consumed_and_committed_from_sql(
    app: SqlFace, api: falcon.testing.TestClient
) -> None:
    q = qname()
    pushed = http_push(api, q, "a", "b", "c")
    rows = app.consume_one(q, batch=2)
    assert [r["payload"] for r in rows] == ["a", "b"]
    assert [r["id"] for r in rows] == [int(p["message_id"]) for p in pushed[:2]]
    assert all(app.commit_one(r) for r in rows)
    app.commit()
    assert [m["data"] for m in http_pop(api, q)] == ["c"]  # the cursor moved past a, b


def test_transaction_id_dedup_is_one_rule_for_both_faces(
    app: SqlFace, api: falcon.testing.TestClient
) -> None:
    q = qname()
    [first] = http_push(api, q, "http", txn="same")
    assert app.produce_one(q, "sql", transaction_id="same") == int(first["message_id"])
    [answer] = app.call("produce", [{"queue": q, "payload": "again", "transactionId": "same"}])
    assert answer["status"] == "duplicate" and answer["message_id"] == first["message_id"]
    sql_id = app.produce_one(q, "sql-first", "P2", "t2")
    app.commit()
    [again] = http_push(api, q, "http-second", partition="P2", txn="t2")
    assert again["status"] == "duplicate" and int(again["message_id"]) == sql_id


def test_an_sql_consume_and_an_http_pop_never_hold_one_partition_at_once(
    app: SqlFace, api: falcon.testing.TestClient
) -> None:
    q = qname()
    app.produce_one(q, "one")
    app.produce_one(q, "two")
    app.commit()
    [held] = app.consume_one(q)
    app.commit()  # the lease is the partition's, for the queue's lease time
    assert http_pop(api, q) == []
    assert app.commit_one(held)
    app.commit()
    [popped] = http_pop(api, q)  # the partition is free: the next message
    assert popped["data"] == "two"
    assert app.consume_one(q) == []  # now HTTP holds it
    assert http_ack(api, popped)[0]["success"] is True
    assert app.consume_one(q) == []  # drained


def test_consumer_groups_and_subscription_modes_are_the_same_on_both_faces(
    app: SqlFace, api: falcon.testing.TestClient
) -> None:
    q = qname()
    http_push(api, q, "old")
    everything = app.consume_one(q, "g-all", 10)
    only_new = app.consume_one(q, "g-new", 10, subscription_mode="new")
    app.commit()
    assert [r["payload"] for r in everything] == ["old"] and only_new == []
    app.produce_one(q, "new")
    app.commit()
    assert [r["payload"] for r in app.consume_one(q, "g-new", 10, auto_commit=True)] == ["new"]
    app.commit()
    # a group's HTTP pop sees the same subscription and cursor
    assert [m["data"] for m in http_pop(api, q, consumerGroup="g-new")] == []
    assert [m["data"] for m in http_pop(api, q)] == ["old", "new"]  # queue mode: its own cursor


def test_failed_commits_retry_up_to_the_limit_then_dead_letter_as_over_http(
    app: SqlFace, api: falcon.testing.TestClient
) -> None:
    q = qname()
    assert app.one("SELECT queen.configure(%s, 30, 1, true)", q) is True
    app.produce_one(q, "x")
    app.commit()
    for attempt in range(2):
        [row] = app.consume_one(q)
        [answer] = app.call("commit", [{"partitionId": row["partition_id"],
                                        "transactionId": row["transaction_id"],
                                        "leaseId": row["lease_id"], "status": "failed",
                                        "errorMessage": f"boom {attempt}"}])  # fmt: skip
        app.commit()
        assert answer["success"] is True and answer["leaseReleased"] is True
        assert answer["dlq"] is (attempt == 1)
    assert app.consume_one(q) == []
    dlq = api.simulate_get("/api/v1/dlq", params={"queue": q}).json
    assert dlq["total"] == 1 and dlq["messages"][0]["errorMessage"] == "boom 1"


def test_nack_redelivers_at_once_and_reject_dead_letters(
    app: SqlFace, api: falcon.testing.TestClient
) -> None:
    q = qname()
    app.produce_one(q, "x")
    app.commit()
    [row] = app.consume_one(q)
    assert app.one("SELECT queen.nack(%s, %s::uuid, %s)", row["transaction_id"],
                   row["partition_id"], row["lease_id"]) is True  # fmt: skip
    [again] = app.consume_one(q)
    assert again["id"] == row["id"] and again["lease_id"] != row["lease_id"]
    assert app.one("SELECT queen.reject(%s, %s::uuid, %s, 'bad input')", again["transaction_id"],
                   again["partition_id"], again["lease_id"]) is True  # fmt: skip
    app.commit()
    assert app.consume_one(q) == []
    dlq = api.simulate_get("/api/v1/dlq", params={"queue": q}).json
    assert [m["errorMessage"] for m in dlq["messages"]] == ["bad input"]


def test_a_commit_under_a_lease_not_held_is_refused(app: SqlFace) -> None:
    q = qname()
    app.produce_one(q, "x")
    [row] = app.consume_one(q)
    [answer] = app.call("commit", [{"transactionId": row["transaction_id"],
                                    "partitionId": row["partition_id"],
                                    "leaseId": str(uuid.uuid4())}])  # fmt: skip
    assert answer["success"] is False and answer["error"] == "Invalid or expired lease"
    assert app.commit_one({**row, "lease_id": str(uuid.uuid4())}) is False
    assert app.commit_one(row) is True


def test_produce_and_commit_take_effect_with_the_callers_commit_only(
    app: SqlFace, migrated_dsn: str
) -> None:
    q = qname()
    other = SqlFace(migrated_dsn)
    try:
        app.produce_one(q, "rolled back")
        assert other.consume_one(q) == []  # not committed: not there for anybody
        app.rollback()
        app.produce_one(q, "kept")
        app.one("SAVEPOINT s")
        app.produce_one(q, "savepoint rolled back", "P2")
        app.one("ROLLBACK TO SAVEPOINT s")
        app.commit()
        assert app.one("SELECT count(*) FROM queen.messages") == 1
        [row] = other.consume_one(q, batch=5)
        other.commit()
        assert row["payload"] == "kept"
        other.commit_one(row)
        other.rollback()  # the commit vanishes: the message comes back after its lease
        assert app.one("SELECT queen.lag(%s)", q) == 1
        app.rollback()
    finally:
        other.close()


def test_a_consume_rolled_back_leaves_the_partition_free(app: SqlFace, api: Any) -> None:
    q = qname()
    app.produce_one(q, "x")
    app.commit()
    [row] = app.consume_one(q)
    app.rollback()
    [popped] = http_pop(api, q)
    assert int(popped["id"]) == row["id"]


def test_a_produce_into_an_encrypted_queue_is_refused_and_stores_nothing(
    app: SqlFace, make_runtime: Callable[..., Runtime]
) -> None:
    api = falcon.testing.TestClient(create_app(make_runtime(QUEEN_ENCRYPTION_KEY="ab" * 32)))
    q = qname()
    r = api.simulate_post("/api/v1/configure",
                          json={"queue": q, "options": {"encryptionEnabled": True}})  # fmt: skip
    assert r.status_code == 200, r.text
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("SELECT queen.produce_one(%s, '1')", (q,)),
        ("SELECT queen.produce(%s::jsonb)", (json.dumps([{"queue": q, "payload": 1}]),)),
        ("SELECT * FROM queen.produce_full(%s, '1', delay_until => now() + '1 h')", (q,)),
        ("SELECT * FROM queen.consume_one(%s)", (q,)),
    ]
    for sql, args in calls:
        with pytest.raises(psycopg2.errors.FeatureNotSupported, match="encryptionEnabled"):
            app.one(sql, *args)
        app.rollback()
    answer = app.call("transaction", [{"type": "push", "queue": q, "payload": 1}])
    assert answer["success"] is False and "encryptionEnabled" in answer["error"]
    app.commit()
    assert app.one("SELECT count(*) FROM queen.messages") == 0
    assert app.one("SELECT count(*) FROM queen.timers") == 0
    http_push(api, q, {"secret": 1})  # the server holds the key: stored encrypted
    assert app.one("SELECT is_encrypted FROM queen.messages") is True
    assert [m["data"] for m in http_pop(api, q)] == [{"secret": 1}]
