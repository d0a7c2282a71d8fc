"""Retry policy and failure classes through HTTP (docs/retries.md): configure options and
their 400s, the ack fields and their 400s, and where the attempts show (message detail,
traces, DLQ listing). A retry's wait is skipped by moving retry_available_at back, never
waited for."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.integration.conftest import AdminApi

ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
POLICY = {"retryStrategy": "exponential", "retryDelay": 500, "retryDelayMax": 800, "retryJitter": 0}


def skip_wait(admin: AdminApi) -> None:
    admin.sql("UPDATE queen.partition_consumers SET retry_available_at = now() - interval '1 ms'")


def ack_body(message: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "transactionId": message["transactionId"],
        "partitionId": message["partitionId"],
        "leaseId": message["leaseId"],
        "consumerGroup": message["consumerGroup"],
        "status": "failed",
        **fields,
    }


def detail(admin: AdminApi, message: dict[str, Any], group: str) -> dict[str, Any]:
    res = admin.get(f"/messages/{message['partitionId']}/{message['transactionId']}")
    assert res.status_code == 200, res.text
    [state] = [g for g in res.json["consumerGroups"] if g["consumerGroup"] == group]
    return dict(state)


# --------------------------------------------------------------------------- configure


def test_configure_stores_and_shows_the_policy(admin: AdminApi) -> None:
    res = admin.post("/configure", {"queue": "pol", "options": {**POLICY, "retryJitter": 0.25}})
    assert res.status_code == 200, res.text
    expected = {**POLICY, "retryJitter": 0.25}
    assert {k: res.json["options"][k] for k in expected} == expected
    shown = admin.get("/resources/queues/pol").json["options"]
    assert {k: shown[k] for k in expected} == expected
    # An upsert: options left out go back to their defaults.
    admin.configure("pol")
    shown = admin.get("/resources/queues/pol").json["options"]
    assert (shown["retryStrategy"], shown["retryDelayMax"], shown["retryJitter"]) == (
        "fixed",
        3_600_000,
        0.1,
    )


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("retryStrategy", "random"),
        ("retryStrategy", "Exponential"),
        ("retryStrategy", 2),
        ("retryDelayMax", -1),
        ("retryDelayMax", "60000"),
        ("retryDelayMax", 1.5),
        ("retryJitter", 1.5),
        ("retryJitter", -0.1),
        ("retryJitter", "0.1"),
        ("retryJitter", True),
    ],
)
def test_bad_policy_is_400_naming_the_option_and_stores_nothing(
    admin: AdminApi, option: str, value: Any
) -> None:
    admin.configure("keep", retryStrategy="linear", retryJitter=0.5)
    before = admin.snapshot()
    for queue in ("keep", "new-queue"):
        res = admin.post("/configure", {"queue": queue, "options": {option: value}})
        assert res.status_code == 400, res.text
        assert f"options.{option}" in res.json["error"]
    assert admin.snapshot() == before


# --------------------------------------------------------------------------- ack fields


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"retryable": "no"}, "retryable must be a boolean"),
        ({"retryable": 0}, "retryable must be a boolean"),
        ({"errorType": 5}, "errorType must be a string"),
        ({"errorType": "x" * 256}, "errorType is too long"),
    ],
)
def test_bad_failure_fields_are_400_and_change_nothing(
    admin: AdminApi, fields: dict[str, Any], error: str
) -> None:
    admin.configure("bf", retryLimit=3)
    admin.push("bf", ["x"])
    [msg] = admin.pop("bf")
    before = admin.snapshot()
    single = admin.post("/ack", ack_body(msg, **fields))
    batch = admin.post("/ack/batch", {"acknowledgments": [ack_body(msg), ack_body(msg, **fields)]})
    for res in (single, batch):
        assert res.status_code == 400, res.text
        assert error in res.json["error"]
    assert admin.snapshot() == before


@pytest.mark.parametrize("route", ["/ack", "/ack/batch"])
@pytest.mark.parametrize("fields", [{"retryable": False}, {"errorType": "validation"}])
def test_non_retryable_ack_dead_letters_on_the_first_failure(
    admin: AdminApi, route: str, fields: dict[str, Any]
) -> None:
    admin.configure("nr", retryLimit=5, retryDelay=1000)
    admin.push("nr", [{"n": 1}])
    [msg] = admin.pop("nr", group="g")
    item = ack_body(msg, error="schema mismatch", **fields)
    body = item if route == "/ack" else {"acknowledgments": [item]}
    res = admin.post(route, body)
    assert res.status_code == 200, res.text
    assert (res.json[0]["status"], res.json[0]["dlq"]) == ("failed_dlq", True)
    [row] = admin.get("/dlq", queue="nr").json["messages"]
    assert (row["errorMessage"], row["errorType"], row["retryCount"]) == (
        "schema mismatch",
        fields.get("errorType"),
        0,
    )
    [attempt] = row["attempts"]
    assert (attempt["attempt"], attempt["error"]) == (1, "schema mismatch")
    assert ISO_MS.match(attempt["failedAt"])
    state = detail(admin, msg, "g")
    assert (state["status"], state["attempt"], state["lastError"]) == (
        "dead_letter",
        1,
        "schema mismatch",
    )


# --------------------------------------------------------------------------- where attempts show


def test_attempts_in_message_detail_traces_and_dlq(admin: AdminApi) -> None:
    admin.configure("seen", retryLimit=2, **POLICY)
    admin.push("seen", [{"n": 1}])
    [msg] = admin.pop("seen")
    untouched = detail(admin, msg, "__QUEUE_MODE__")
    assert (untouched["attempt"], untouched["attempts"], untouched["lastDelayMs"]) == (0, [], None)

    for n, wait in ((1, 500), (2, 800)):  # exponential 500, 1000 capped at 800
        res = admin.post("/ack", ack_body(msg, error=f"down {n}", errorType="network"))
        assert res.json[0]["status"] == "failed_retry" and res.json[0]["retryDelayMs"] == wait
        state = detail(admin, msg, "__QUEUE_MODE__")
        assert (state["status"], state["retryCount"], state["attempt"]) == ("pending", n, n)
        assert (state["lastDelayMs"], state["lastError"], state["errorType"]) == (
            wait,
            f"down {n}",
            "network",
        )
        assert ISO_MS.match(state["nextAttemptAt"])
        assert state["nextAttemptAt"] == state["attempts"][-1]["availableAt"]
        assert [a["delayMs"] for a in state["attempts"]] == [500, 800][:n]
        assert admin.pop("seen") == [], "not before its delay"
        skip_wait(admin)
        [msg] = admin.pop("seen")
        assert msg["retryCount"] == n
        assert detail(admin, msg, "__QUEUE_MODE__")["nextAttemptAt"] is None, "delivered again"

    res = admin.post("/ack", ack_body(msg, error="down 3", errorType="network"))
    assert res.json[0]["status"] == "failed_dlq"
    state = detail(admin, msg, "__QUEUE_MODE__")
    assert (state["status"], state["attempt"], state["lastError"], state["nextAttemptAt"]) == (
        "dead_letter",
        3,
        "down 3",
        None,
    )

    [row] = admin.get("/dlq", queue="seen").json["messages"]
    assert (row["errorMessage"], row["errorType"], row["retryCount"]) == ("down 3", "network", 2)
    assert [(a["attempt"], a["error"], a.get("delayMs")) for a in row["attempts"]] == [
        (1, "down 1", 500),
        (2, "down 2", 800),
        (3, "down 3", None),
    ]
    assert row["attempts"] == state["attempts"]

    traces = admin.get(f"/traces/{msg['partitionId']}/{msg['transactionId']}").json["traces"]
    assert [(t["eventType"], t["data"]["attempt"]) for t in traces] == [
        ("retry_scheduled", 1),
        ("retry_scheduled", 2),
        ("dead_lettered", 3),
    ]
    scheduled = traces[1]["data"]
    assert (scheduled["delayMs"], scheduled["strategy"], scheduled["error"]) == (
        800,
        "exponential",
        "down 2",
    )
    assert scheduled["availableAt"] == row["attempts"][1]["availableAt"]
    assert traces[2]["data"]["reason"] == "retries_exhausted"
    assert {t["consumerGroup"] for t in traces} == {"__QUEUE_MODE__"}


def test_official_client_ack_shape_still_works(admin: AdminApi) -> None:
    """The fields the official client sends (no errorType / retryable) keep their meaning."""
    admin.configure("cl", retryLimit=1)
    admin.push("cl", ["x"])
    [msg] = admin.pop("cl")
    body = {
        "transactionId": msg["transactionId"],
        "partitionId": msg["partitionId"],
        "status": "failed",
        "error": "boom",
        "consumerGroup": None,
        "leaseId": msg["leaseId"],
    }
    assert admin.post("/ack", body).json[0]["status"] == "failed_retry"
    [msg] = admin.pop("cl")
    body["leaseId"] = msg["leaseId"]
    assert admin.post("/ack", body).json[0]["status"] == "failed_dlq"
    [row] = admin.get("/dlq", queue="cl").json["messages"]
    assert (row["errorMessage"], row["errorType"], len(row["attempts"])) == ("boom", None, 2)
