"""GET /api/v1/messages: the ns, task and status filters (each applied, each validated)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import AdminApi


def listed(admin: AdminApi, **params: Any) -> list[Any]:
    res = admin.get("/messages", **params)
    assert res.status_code == 200, res.text
    body = res.json
    assert body["total"] == len(body["messages"])
    return sorted(m["transactionId"] for m in body["messages"])


def txns(results: list[dict[str, Any]]) -> list[str]:
    return sorted(r["transactionId"] for r in results)


def test_namespace_and_task_filters(admin: AdminApi) -> None:
    inv = admin.push("billing.invoices", [1, 2])
    ref = admin.push("billing.refunds", [3])
    other = admin.push("shop.invoices", [4])
    assert listed(admin, ns="billing") == txns(inv + ref)
    assert listed(admin, namespace="billing") == txns(inv + ref)  # the other routes' name
    assert listed(admin, task="invoices") == txns(inv + other)
    assert listed(admin, ns="billing", task="invoices") == txns(inv)
    assert listed(admin, ns="nobody") == []


def test_status_filter_is_queue_modes_view(admin: AdminApi) -> None:
    admin.configure("fs", retryLimit=0)
    a, b, c, d = admin.push("fs", ["a", "b", "c", "d"])
    [ma] = admin.pop("fs")
    admin.ack(ma)
    admin.fail_next("fs")
    admin.pop("fs")  # c is leased
    [g] = admin.pop("fs", group="g")  # a named group's state does not count
    admin.ack(g)
    assert listed(admin, queue="fs", status="completed") == [a["transactionId"]]
    assert listed(admin, queue="fs", status="dead_letter") == [b["transactionId"]]
    assert listed(admin, queue="fs", status="processing") == [c["transactionId"]]
    assert listed(admin, queue="fs", status="pending") == [d["transactionId"]]
    untouched = admin.push("fs2", ["e"])  # queue mode never read it: pending
    assert listed(admin, status="pending") == txns([d, *untouched])
    page = admin.get("/messages", queue="fs", status="completed", limit=1).json
    assert page["total"] == 1 and page["messages"][0]["status"] == "completed"


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"status": "done"},
         "status must be one of pending, processing, completed, dead_letter, got 'done'"),
        ({"ns": "a", "namespace": "b"}, "ns and namespace name different namespaces"),
        ({"task": "bad name"}, "Invalid task name"),
        ({"ns": "bad name"}, "Invalid namespace name"),
    ],
)  # fmt: skip
def test_bad_filters_are_400(admin: AdminApi, params: dict[str, str], error: str) -> None:
    admin.push("fb", [1])
    res = admin.get("/messages", **params)
    assert res.status_code == 400 and res.json["error"].startswith(error), res.json
