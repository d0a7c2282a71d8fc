"""GET /api/v1/resources/{queues, queues/{q}, namespaces, tasks} through HTTP, and the
DELETE of /api/v1/resources/queues/{q} that shares its route with the queue detail."""

from __future__ import annotations

from tests.integration.conftest import AdminApi


def setup_queues(admin: AdminApi) -> None:
    admin.configure("billing.invoices", retryLimit=0, leaseTime=30)
    admin.push("billing.invoices", [1, 2, 3], partition="eu")
    admin.push("billing.invoices", [4], partition="us")
    admin.push("billing.refunds", [5])
    admin.push("plain", [6, 7])
    [done] = admin.pop("billing.invoices", partition="eu")
    admin.ack(done)
    admin.fail_next("billing.invoices", partition="eu")
    admin.pop("billing.invoices", partition="eu")  # the third eu message is leased


def test_queue_list_with_counts(admin: AdminApi) -> None:
    setup_queues(admin)
    res = admin.get("/resources/queues")
    assert res.status_code == 200
    queues = {q["name"]: q for q in res.json["queues"]}
    assert list(queues) == ["billing.invoices", "billing.refunds", "plain"]
    inv = queues["billing.invoices"]
    # configure creates the Default partition, push created eu and us
    assert (inv["namespace"], inv["task"], inv["partitions"]) == ("billing", "invoices", 3)
    assert inv["messages"] == {
        "total": 4, "pending": 1, "processing": 1, "completed": 2, "deadLettered": 1,
    }  # fmt: skip
    assert inv["id"] and inv["createdAt"].endswith("Z")
    assert queues["plain"]["messages"]["pending"] == 2


def test_queue_detail(admin: AdminApi) -> None:
    setup_queues(admin)
    res = admin.get("/resources/queues/billing.invoices")
    assert res.status_code == 200
    body = res.json
    assert body["name"] == "billing.invoices" and body["partitionCount"] == 3
    assert body["options"]["leaseTime"] == 30 and body["options"]["retryLimit"] == 0
    # `partitions` is the list, as the original answers it (queenctl's `queue describe`)
    parts = {p["name"]: p for p in body["partitions"]}
    assert [p["name"] for p in body["partitions"]] == ["Default", "eu", "us"]
    assert parts["eu"]["messages"] == {"total": 3, "pending": 0, "processing": 1, "completed": 2}
    assert parts["eu"]["stats"] == parts["eu"]["messages"]  # the original's name for them
    assert parts["us"]["messages"]["pending"] == 1
    assert parts["Default"]["messages"]["total"] == 0
    assert body["consumerGroups"] == ["__QUEUE_MODE__"]
    assert body["messages"]["deadLettered"] == 1


def test_queue_detail_unknown_is_404_bad_name_is_400(admin: AdminApi) -> None:
    res = admin.get("/resources/queues/nope")
    assert res.status_code == 404 and "nope" in res.json["error"]
    assert admin.get("/resources/queues/bad%20name").status_code == 400


def test_delete_still_works_on_the_shared_route(admin: AdminApi) -> None:
    admin.push("gone", [1])
    res = admin.delete("/resources/queues/gone")
    assert res.status_code == 200
    assert res.json == {"deleted": True, "queue": "gone", "existed": True}
    assert admin.get("/resources/queues/gone").status_code == 404
    assert admin.delete("/resources/queues/gone").json["existed"] is False


def test_namespaces_and_tasks(admin: AdminApi) -> None:
    setup_queues(admin)
    namespaces = admin.get("/resources/namespaces").json["namespaces"]
    assert [(n["namespace"], n["queues"], n["partitions"]) for n in namespaces] == [
        ("billing", ["billing.invoices", "billing.refunds"], 4),
        ("plain", ["plain"], 1),
    ]
    assert namespaces[0]["messages"]["total"] == 5
    tasks = admin.get("/resources/tasks").json["tasks"]
    assert [(t["task"], t["queues"]) for t in tasks] == [
        ("", ["plain"]), ("invoices", ["billing.invoices"]), ("refunds", ["billing.refunds"]),
    ]  # fmt: skip


def test_empty_listings(admin: AdminApi) -> None:
    assert admin.get("/resources/queues").json == {"queues": []}
    assert admin.get("/resources/namespaces").json == {"namespaces": []}
    assert admin.get("/resources/tasks").json == {"tasks": []}
    assert admin.get("/consumer-groups").json == []
    assert admin.get("/dlq").json == {
        "messages": [], "total": 0, "pagination": {"limit": 100, "offset": 0},
    }  # fmt: skip
