"""Unknown body fields are ignored and named on every route that reads a JSON object body
(http/ignored.py; each body's known fields are its capability's `<BODY>_FIELDS`), and the
fields the official clients send are known on each of them."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from queen_threads.admin import body as admin_body
from queen_threads.dlq.body import RETRY_FIELDS
from queen_threads.operations.body import SWITCH_FIELDS
from queen_threads.queue import body as queue_body
from queen_threads.timers.body import BATCH_FIELDS as TIMERS_FIELDS
from tests.integration.conftest import AdminApi

IGNORED = "Queen-Ignored-Parameters"
PID = "00000000-0000-0000-0000-000000000001"
_queues = itertools.count()

Case = Callable[[AdminApi], tuple[str, dict[str, Any]]]  # a fresh (path, body) for each call


def _message(admin: AdminApi) -> dict[str, Any]:
    """A fresh message, alone in a fresh queue."""
    [result] = admin.push(f"bf{next(_queues)}", ["x"])
    return result


def _dead_letter(admin: AdminApi) -> dict[str, Any]:
    [message] = admin.dead_letter(f"bf{next(_queues)}", ["x"])
    return message


def _queue(admin: AdminApi) -> str:
    name = f"bf{next(_queues)}"
    admin.configure(name)
    return name


def _schedule(admin: AdminApi) -> dict[str, Any]:
    payload = base64.b64encode(orjson.dumps({"a": 1})).decode()
    op = {"op": "schedule", "queue": f"bf{next(_queues)}", "timerKey": "k", "payload": payload,
          "delayMs": 60_000}  # fmt: skip
    return {"operations": [op]}


def _key(message: dict[str, Any]) -> str:
    return f"{message.get('partition_id') or message['partitionId']}/{message['transactionId']}"


# (route, expected status, the fields the official clients send it (0.15.0, 2.6.0), a case)
CASES: list[tuple[str, int, set[str], Case]] = [
    ("push", 201, {"items"},
     lambda a: ("/push", {"items": [{"queue": f"bf{next(_queues)}", "payload": 1}]})),
    ("ack", 200, {"transactionId", "partitionId", "status", "error", "consumerGroup", "leaseId"},
     lambda a: ("/ack", {"transactionId": "t", "partitionId": PID})),
    ("ack batch", 200, {"acknowledgments", "consumerGroup"},
     lambda a: ("/ack/batch", {"acknowledgments": [{"transactionId": "t", "partitionId": PID}]})),
    ("configure", 200, {"queue", "namespace", "task", "options"},
     lambda a: ("/configure", {"queue": f"bf{next(_queues)}", "options": {"leaseTime": 30}})),
    ("subscription", 200, {"subscriptionTimestamp"},
     lambda a: ("/consumer-groups/g/subscription",
                {"subscriptionTimestamp": "2025-01-01T00:00:00Z"})),
    ("seek", 200, {"toEnd", "timestamp"},
     lambda a: (f"/consumer-groups/g/queues/{_queue(a)}/seek", {"toEnd": True})),
    ("traces", 201, {"transactionId", "partitionId", "consumerGroup", "traceNames", "eventType",
                     "data"},
     lambda a: ("/traces", {**dict(zip(("partitionId", "transactionId"),
                                       _key(_message(a)).split("/"), strict=True)),
                            "data": {"step": 1}})),
    ("move to the DLQ", 200, set(),
     lambda a: (f"/messages/{_key(_message(a))}/dlq", {"error": "by hand"})),
    ("retry from the DLQ", 200, set(),
     lambda a: (f"/messages/{_key(_dead_letter(a))}/retry", {})),
    ("stats refresh", 200, set(), lambda a: ("/stats/refresh", {})),
    ("timers", 200, {"operations"}, lambda a: ("/timers", _schedule(a))),
    ("push maintenance", 200, {"enabled"}, lambda a: ("/system/maintenance", {"enabled": False})),
    ("pop maintenance", 200, {"enabled"},
     lambda a: ("/system/maintenance/pop", {"enabled": False})),
]  # fmt: skip


@pytest.mark.parametrize(
    ("status", "case"), [(c[1], c[3]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_an_unknown_body_field_is_ignored_and_named(
    admin: AdminApi, status: int, case: Case
) -> None:
    """The same request with and without an unknown field: the same answer, and the one
    with it names the field in the header and counts it in /metrics."""
    path, body = case(admin)
    plain = admin.post(path, body)
    assert plain.status_code == status, plain.text
    assert IGNORED not in plain.headers
    path, body = case(admin)
    res = admin.post(path, {**body, "bogus": 1, "consumergroup": "g"})
    assert res.status_code == status, res.text
    assert res.headers[IGNORED] == "body:bogus, body:consumergroup"
    counted = admin.client.simulate_get("/metrics").json["ignoredParameters"]
    assert any(names.get("body:bogus") == 1 for names in counted.values()), counted


KNOWN = {
    "push": queue_body.PUSH_FIELDS,
    "ack": queue_body.ACK_FIELDS,
    "ack batch": queue_body.ACK_BATCH_FIELDS,
    "configure": queue_body.CONFIGURE_FIELDS,
    "subscription": admin_body.SUBSCRIPTION_FIELDS,
    "seek": admin_body.SEEK_FIELDS,
    "traces": admin_body.TRACE_FIELDS,
    "move to the DLQ": admin_body.MOVE_TO_DLQ_FIELDS,
    "retry from the DLQ": RETRY_FIELDS,
    "stats refresh": admin_body.STATS_REFRESH_FIELDS,
    "timers": TIMERS_FIELDS,
    "push maintenance": SWITCH_FIELDS,
    "pop maintenance": SWITCH_FIELDS,
}


@pytest.mark.parametrize(
    ("route", "sends"), [(c[0], c[2]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_what_the_official_clients_send_is_known(route: str, sends: set[str]) -> None:
    assert sends <= set(KNOWN[route]), sorted(sends - set(KNOWN[route]))


def test_a_known_field_with_a_bad_value_is_still_400_and_changes_nothing(admin: AdminApi) -> None:
    message = _message(admin)
    before = admin.snapshot()
    res = admin.post(f"/messages/{_key(message)}/dlq", {"consumerGroup": "no/slash", "x": 1})
    assert res.status_code == 400 and "consumer group" in res.json["error"]
    res = admin.post("/traces", {"transactionId": "t", "partitionId": PID, "data": 1,
                                 "traceNames": 5, "x": 1})  # fmt: skip
    assert res.status_code == 400 and "traceNames" in res.json["error"]
    assert admin.snapshot() == before


def test_a_timers_body_that_is_not_an_object_keeps_its_coded_refusal(admin: AdminApi) -> None:
    res = admin.post("/timers", [])
    assert res.status_code == 400
    assert res.json["code"] == "timers_bad_request"
    assert "the body must be a JSON object" in res.json["error"]
