"""The queue-core routes through HTTP (in-process falcon client) on real PostgreSQL,
with their bad inputs: a clear 4xx JSON error and nothing changed in the database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import falcon.testing
import pytest

from queen_threads.app import create_app
from queen_threads.runtime import Runtime
from tests.support.sql import sql_rows, sql_value


class Client(falcon.testing.TestClient):
    """The in-process HTTP client, with the Runtime behind it for database checks."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(create_app(runtime))
        self.runtime = runtime


def count(api: Client, sql: str) -> int:
    return int(sql_value(api.runtime.db, sql))


@pytest.fixture
def api(make_runtime: Callable[..., Runtime]) -> Client:
    return Client(make_runtime(MAX_BODY_SIZE="65536"))


def push(api: Client, *items: dict[str, Any]) -> list[dict[str, Any]]:
    r = api.simulate_post("/api/v1/push", json={"items": list(items)})
    assert r.status_code == 201, r.text
    return list(r.json)


def pop(api: Client, queue: str, **params: Any) -> falcon.testing.Result:
    return api.simulate_get(f"/api/v1/pop/queue/{queue}", params=params)


MESSAGE_FIELDS = (
    "id", "transactionId", "partitionId", "partition", "queue", "leaseId",
    "consumerGroup", "data", "traceId", "producerSub", "retryCount", "createdAt",
)  # fmt: skip


def assert_nothing_stored(api: Client) -> None:
    assert count(api, "SELECT count(*) FROM queen.queues") == 0
    assert count(api, "SELECT count(*) FROM queen.messages") == 0


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"{not json", "Invalid JSON"),
        (b"", "Empty request body"),
        (b"[]", "must be a JSON object"),
        (b'{"items": {}}', "items array is required"),
        (b'{"items": [{"queue": 5}]}', "Queue must be a string"),
        (b'{"items": [{"payload": 1}]}', "Queue is required"),
        (b'{"items": [{"queue": "a/b"}]}', "Invalid queue name"),
        (b'{"items": [{"queue": "q\'; drop"}]}', "Invalid queue name"),
        ('{"items": [{"queue": "caf\u00e9"}]}'.encode(), "Invalid queue name"),
        (b'{"items": [{"queue": "q", "partition": 3}]}', "Partition must be a string"),
        (b'{"items": [{"queue": "q", "transactionId": 7}]}', "TransactionId must be a string"),
        (b'{"items": [{"queue": "q", "traceId": "nope"}]}', "TraceId must be a UUID"),
        (b'{"items": [{"queue": "ok"}, "x"]}', "Each item must be a JSON object"),
    ],
)
def test_push_rejects_bad_input_and_changes_nothing(api: Client, body: bytes, error: str) -> None:
    r = api.simulate_post("/api/v1/push", body=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert error in r.json["error"]
    assert_nothing_stored(api)


def test_push_body_over_limit_is_413(api: Client) -> None:
    big = {"items": [{"queue": "q", "payload": "x" * 70000}]}
    r = api.simulate_post("/api/v1/push", json=big)
    assert r.status_code == 413
    assert "too large" in r.json["error"]
    assert_nothing_stored(api)


def test_push_empty_items_is_201_empty_array(api: Client) -> None:
    r = api.simulate_post("/api/v1/push", json={"items": []})
    assert (r.status_code, r.json) == (201, [])


def test_push_results_in_input_order_with_both_id_spellings(api: Client) -> None:
    res = push(
        api,
        {"queue": "orders", "payload": {"n": 1}, "transactionId": "a"},
        {"queue": "orders", "payload": None, "transactionId": "b"},
        {"queue": "orders", "payload": [1], "transactionId": "a"},
    )
    assert [r["status"] for r in res] == ["queued", "queued", "duplicate"]
    assert [r["transactionId"] for r in res] == ["a", "b", "a"]
    assert [r["transaction_id"] for r in res] == ["a", "b", "a"]


@pytest.mark.parametrize(
    "payload", [None, {}, [], "text", 0, 3.5, True, {"deep": {"list": [1, None, {"x": "y"}]}}]
)
def test_payloads_round_trip_exactly(api: Client, payload: Any) -> None:
    push(api, {"queue": "rt", "payload": payload})
    r = pop(api, "rt")
    assert r.status_code == 200
    assert r.json["messages"][0]["data"] == payload


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"batch": "0"}, "batch must be"),
        ({"batch": "abc"}, "batch must be an integer"),
        ({"batch": "1000000"}, "batch must be"),
        ({"partitions": "0"}, "partitions must be"),
        ({"timeout": "-5"}, "timeout must be"),
        ({"subscriptionMode": "sideways"}, "Unknown subscriptionMode"),
        ({"subscriptionFrom": "yesterday"}, "subscriptionFrom must be an ISO-8601"),
        ({"consumerGroup": "bad group!"}, "Invalid consumer group name"),
    ],
)
def test_pop_rejects_bad_parameters(api: Client, params: dict[str, str], error: str) -> None:
    r = pop(api, "q", **params)
    assert r.status_code == 400
    assert error in r.json["error"]


def test_pop_of_unknown_queue_is_204_and_creates_nothing(api: Client) -> None:
    r = pop(api, "ghost")
    assert r.status_code == 204
    assert r.content == b""
    assert_nothing_stored(api)


def test_namespace_pop_needs_namespace_or_task(api: Client) -> None:
    r = api.simulate_get("/api/v1/pop")
    assert r.status_code == 400
    assert "namespace or task" in r.json["error"]


def test_message_fields_and_ack_flow(api: Client) -> None:
    push(api, {"queue": "flow", "payload": {"v": 1}, "transactionId": "t-1"})
    r = pop(api, "flow")
    msg = r.json["messages"][0]
    assert set(MESSAGE_FIELDS) <= set(msg)
    assert msg["createdAt"].endswith("Z") and len(msg["createdAt"]) == 27
    assert pop(api, "flow").status_code == 204, "leased: nothing else to deliver"
    ack = {"transactionId": "t-1", "partitionId": msg["partitionId"], "leaseId": msg["leaseId"]}
    r = api.simulate_post("/api/v1/ack", json=ack)
    assert r.status_code == 200
    assert r.json[0]["success"] is True
    r = api.simulate_post("/api/v1/ack", json=ack)
    assert r.json[0]["success"] is not None  # second ack: harmless
    assert pop(api, "flow").status_code == 204, "completed: never delivered again"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"partitionId": "00000000-0000-0000-0000-000000000000"}, "transactionId is required"),
        ({"transactionId": "x"}, "partitionId is required"),
        ({"transactionId": "x", "partitionId": "not-a-uuid"}, "partitionId must be a UUID"),
        (
            {
                "transactionId": "x",
                "partitionId": "00000000-0000-0000-0000-000000000000",
                "status": "maybe",
            },
            "Unknown status",
        ),
    ],
)
def test_ack_rejects_bad_input(api: Client, body: dict[str, Any], error: str) -> None:
    r = api.simulate_post("/api/v1/ack", json=body)
    assert r.status_code == 400
    assert error in r.json["error"]


def test_wrong_lease_is_rejected_without_state_change(api: Client) -> None:
    push(api, {"queue": "wl", "payload": 1, "transactionId": "m"})
    msg = pop(api, "wl").json["messages"][0]
    bad = {"transactionId": "m", "partitionId": msg["partitionId"],
           "leaseId": "11111111-1111-1111-1111-111111111111"}  # fmt: skip
    r = api.simulate_post("/api/v1/ack", json=bad)
    assert r.json[0]["success"] is False
    assert "lease" in r.json[0]["error"].lower()
    good = dict(bad, leaseId=msg["leaseId"])
    assert api.simulate_post("/api/v1/ack", json=good).json[0]["success"] is True


def test_batch_ack_validates_every_item(api: Client) -> None:
    r = api.simulate_post("/api/v1/ack/batch", json={"acknowledgments": [{"transactionId": "x"}]})
    assert r.status_code == 400
    assert "partitionId" in r.json["error"]
    r = api.simulate_post("/api/v1/ack/batch", json={"acknowledgments": []})
    assert r.status_code == 400


def test_transaction_validation_and_rollback(api: Client) -> None:
    assert api.simulate_post("/api/v1/transaction", json={}).status_code == 400
    assert api.simulate_post("/api/v1/transaction", json={"operations": []}).status_code == 400
    r = api.simulate_post("/api/v1/transaction", json={"operations": [{"type": "teleport"}]})
    assert r.status_code == 400
    assert "Unknown operation type" in r.json["error"]
    ops = [
        {"type": "push", "items": [{"queue": "tx", "payload": 1}]},
        {
            "type": "ack",
            "transactionId": "missing",
            "partitionId": "00000000-0000-0000-0000-000000000000",
        },
    ]
    r = api.simulate_post("/api/v1/transaction", json={"operations": ops})
    assert r.status_code == 409
    assert r.json["success"] is False
    assert r.json["error"]
    assert count(api, "SELECT count(*) FROM queen.messages") == 0, "rolled back"


def test_lease_extend_accepts_empty_body(api: Client) -> None:
    push(api, {"queue": "le", "payload": 1})
    lease = pop(api, "le").json["messages"][0]["leaseId"]
    r = api.simulate_post(f"/api/v1/lease/{lease}/extend")
    assert r.status_code == 200
    assert r.json["success"] is True
    assert r.json["leaseId"] == lease
    assert r.json["newExpiresAt"]
    r = api.simulate_post(f"/api/v1/lease/{lease}/extend", json={"seconds": "ten"})
    assert r.status_code == 400
    r = api.simulate_post("/api/v1/lease/22222222-2222-2222-2222-222222222222/extend")
    assert r.status_code == 404
    assert r.json["success"] is False


def test_configure_validates_and_echoes_options(api: Client) -> None:
    assert api.simulate_post("/api/v1/configure", json={}).status_code == 400
    r = api.simulate_post("/api/v1/configure", json={"queue": "c", "options": {"leaseTime": "x"}})
    assert r.status_code == 400
    assert "leaseTime" in r.json["error"]
    assert_nothing_stored(api)
    r = api.simulate_post(
        "/api/v1/configure", json={"queue": "c", "options": {"leaseTime": 30, "retryLimit": 5}}
    )
    assert r.status_code == 200
    assert r.json["configured"] is True
    assert r.json["options"]["leaseTime"] == 30
    assert r.json["options"]["retryLimit"] == 5


def test_delete_queue_reports_existence(api: Client) -> None:
    push(api, {"queue": "gone", "payload": 1})
    r = api.simulate_delete("/api/v1/resources/queues/gone")
    assert r.json == {"deleted": True, "queue": "gone", "existed": True}
    assert_nothing_stored(api)
    r = api.simulate_delete("/api/v1/resources/queues/gone")
    assert r.json["existed"] is False


def test_encrypted_queue_stores_ciphertext_and_pops_plaintext(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = make_runtime(QUEEN_ENCRYPTION_KEY="ab" * 32)
    api = Client(runtime)
    api.simulate_post(
        "/api/v1/configure", json={"queue": "sec", "options": {"encryptionEnabled": True}}
    )
    r = api.simulate_post(
        "/api/v1/push", json={"items": [{"queue": "sec", "payload": {"pin": 1234}}]}
    )
    assert r.status_code == 201
    stored = sql_rows(runtime.db, "SELECT payload, is_encrypted FROM queen.messages")[0]
    assert stored is not None
    assert stored[1] is True
    assert "pin" not in str(stored[0]) and "encrypted" in stored[0]
    r = api.simulate_get("/api/v1/pop/queue/sec")
    assert r.json["messages"][0]["data"] == {"pin": 1234}
