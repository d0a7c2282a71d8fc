"""GET /api/v1/messages, GET and DELETE /api/v1/messages/{pid}/{tid} through HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.conftest import AdminApi

KEY = "cd" * 32


def statuses(admin: AdminApi, **params: Any) -> dict[Any, str]:
    return {
        m["transactionId"]: m["status"] for m in admin.get("/messages", **params).json["messages"]
    }


# --------------------------------------------------------------------------- listing


def test_a_limit_above_1000_reads_1000_and_says_so(admin: AdminApi) -> None:
    """queenctl's `messages list --limit 10000`: the original answers any limit; here one
    request reads at most 1000 rows and the answer names the limit it used."""
    admin.push("big", list(range(1005)))
    res = admin.get("/messages", queue="big", limit="10000")
    assert res.status_code == 200, res.text
    assert res.headers["Queen-Clamped-Parameters"] == "limit=1000"
    assert len(res.json["messages"]) == 1000 and res.json["total"] == 1005
    assert res.json["pagination"] == {"limit": 1000, "offset": 0}
    rest = admin.get("/messages", queue="big", limit="10000", offset="1000")
    assert len(rest.json["messages"]) == 5
    exact = admin.get("/messages", queue="big", limit="1000")
    assert "Queen-Clamped-Parameters" not in exact.headers and len(exact.json["messages"]) == 1000
    assert admin.get("/messages", limit="0").status_code == 400  # below 1 is still an error
    for path in ("/dlq", "/resources/partitions", "/traces/names", "/status/queues"):
        other = admin.get(path, limit="5000")  # every paged listing: the same rule
        assert other.status_code == 200, (path, other.text)
        assert other.headers["Queen-Clamped-Parameters"] == "limit=1000", path


def test_list_newest_first_with_fields_paging_and_total(admin: AdminApi) -> None:
    pushed = admin.push("ml", [1, 2, 3], partition="P1") + admin.push("ml", [4], partition="P2")
    admin.push("other", [5])
    body = admin.get("/messages", queue="ml").json
    assert body["total"] == 4 and body["pagination"] == {"limit": 200, "offset": 0}
    assert [m["transactionId"] for m in body["messages"]] == [
        p["transactionId"] for p in reversed(pushed)
    ]
    first = body["messages"][0]
    assert (first["queue"], first["partition"], first["namespace"]) == ("ml", "P2", "ml")
    assert (
        first["partitionId"] == pushed[3]["partition_id"] and first["id"] == pushed[3]["message_id"]
    )
    assert first["createdAt"].endswith("Z") and "data" not in first
    assert first["status"] == "pending"
    assert first["busStatus"] == {"consumedBy": 0, "totalGroups": 0}

    page = admin.get("/messages", queue="ml", limit=2, offset=1).json
    assert page["total"] == 4 and [m["transactionId"] for m in page["messages"]] == [
        pushed[2]["transactionId"], pushed[1]["transactionId"],
    ]  # fmt: skip
    assert admin.get("/messages", queue="ml", partition="P1").json["total"] == 3
    assert admin.get("/messages").json["total"] == 5
    assert admin.get("/messages", queue="missing").json == {
        "messages": [], "total": 0, "pagination": {"limit": 200, "offset": 0},
    }  # fmt: skip


def test_list_time_filters(admin: AdminApi) -> None:
    old, new = admin.push("mt", ["old", "new"])
    admin.sql(
        "UPDATE queen.messages SET created_at = '2025-01-01T00:00:00Z' WHERE transaction_id = %s",
        old["transactionId"],
    )
    assert list(statuses(admin, **{"to": "2025-06-01T00:00:00Z"})) == [old["transactionId"]]
    assert list(statuses(admin, **{"from": "2025-06-01T00:00:00Z"})) == [new["transactionId"]]


def test_list_status_follows_queue_mode_and_counts_groups(admin: AdminApi) -> None:
    admin.configure("ms", retryLimit=0)
    a, b, c, d = admin.push("ms", ["a", "b", "c", "d"])
    [ma] = admin.pop("ms")
    admin.ack(ma)  # a: completed
    admin.fail_next("ms")  # b: dead letter
    admin.pop("ms")  # c: processing (leased)
    [ga] = admin.pop("ms", group="g1")
    admin.ack(ga)  # g1 consumed a only
    got = statuses(admin, queue="ms")
    assert got == {
        a["transactionId"]: "completed", b["transactionId"]: "dead_letter",
        c["transactionId"]: "processing", d["transactionId"]: "pending",
    }  # fmt: skip
    bus = {m["transactionId"]: m["busStatus"] for m in admin.get("/messages").json["messages"]}
    assert bus[a["transactionId"]] == {"consumedBy": 1, "totalGroups": 1}
    assert bus[b["transactionId"]] == {"consumedBy": 0, "totalGroups": 1}


@pytest.mark.parametrize(
    "params",
    [
        {"limit": "0"},
        {"limit": "-1"},
        {"offset": "x"},
        {"from": "not-a-time"},
        {"from": "2025-01-02", "to": "2025-01-01"},
        {"queue": "spaces are bad"},
        {"partition": "%%%"},
    ],
)
def test_list_bad_query_is_400(admin: AdminApi, params: dict[str, str]) -> None:
    admin.push("mb", [1])
    res = admin.get("/messages", **params)
    assert res.status_code == 400 and res.json["error"]


# --------------------------------------------------------------------------- detail


def test_detail_shows_payload_and_every_group_state(admin: AdminApi) -> None:
    admin.configure("md", retryLimit=0)
    [m] = admin.push("md", [{"deep": [1, {"x": None}]}])
    [leased] = admin.pop("md")
    admin.fail_next("md", group="g2")
    [g1] = admin.pop("md", group="g1")
    admin.ack(g1)
    res = admin.get(f"/messages/{m['partition_id']}/{m['transactionId']}")
    assert res.status_code == 200
    body = res.json
    assert body["data"] == {"deep": [1, {"x": None}]}
    assert (body["id"], body["queue"], body["partition"]) == (m["message_id"], "md", "Default")
    assert body["transactionId"] == m["transactionId"] and body["partitionId"] == m["partition_id"]
    assert "isEncrypted" not in body and body["createdAt"].endswith("Z")
    groups = {g["consumerGroup"]: g for g in body["consumerGroups"]}
    assert set(groups) == {"__QUEUE_MODE__", "g1", "g2"}
    qm = groups["__QUEUE_MODE__"]
    assert (qm["status"], qm["leased"], qm["consumed"]) == ("processing", True, False)
    assert qm["leaseExpiresAt"].endswith("Z")
    assert (groups["g1"]["status"], groups["g1"]["consumed"]) == ("completed", True)
    g2 = groups["g2"]
    assert (g2["status"], g2["deadLettered"], g2["errorMessage"]) == ("dead_letter", True, "boom")
    assert leased["transactionId"] == m["transactionId"]


def test_detail_decrypts(make_admin: Callable[..., AdminApi]) -> None:
    admin = make_admin(QUEEN_ENCRYPTION_KEY=KEY)
    admin.configure("menc", encryptionEnabled=True)
    [m] = admin.push("menc", ["top secret"])
    body = admin.get(f"/messages/{m['partition_id']}/{m['transactionId']}").json
    assert body["data"] == "top secret"


def test_detail_unknown_is_404_and_bad_id_is_400(admin: AdminApi) -> None:
    [m] = admin.push("mu", [1])
    assert admin.get(f"/messages/{m['partition_id']}/nope").status_code == 404
    res = admin.get(f"/messages/{uuid.uuid4()}/{m['transactionId']}")
    assert res.status_code == 404 and res.json == {"error": "Message not found"}
    res = admin.get(f"/messages/123/{m['transactionId']}")
    assert res.status_code == 400 and "partitionId" in res.json["error"]


# --------------------------------------------------------------------------- delete


def test_delete_removes_the_message_with_its_dlq_rows_and_traces(admin: AdminApi) -> None:
    [failed] = admin.dead_letter("mdel", ["x"])
    [keep] = admin.push("mdel", ["y"])
    path = f"/messages/{failed['partitionId']}/{failed['transactionId']}"
    trace = {"transactionId": failed["transactionId"], "partitionId": failed["partitionId"]}
    assert admin.post("/traces", {**trace, "data": {"step": 1}}).status_code == 201
    res = admin.delete(path)
    assert res.status_code == 200
    assert res.json == {
        "deleted": True, "partitionId": failed["partitionId"],
        "transactionId": failed["transactionId"],
    }  # fmt: skip
    assert admin.get(path).status_code == 404
    assert admin.get("/dlq").json["total"] == 0
    assert admin.sql("SELECT count(*) FROM queen.message_traces") == [(0,)]
    assert admin.delete(path).status_code == 404
    assert [m["data"] for m in admin.pop("mdel")] == ["y"] and keep


def test_delete_of_a_leased_message_is_409_until_it_is_acked(admin: AdminApi) -> None:
    admin.push("mlk", ["a"])
    [m] = admin.pop("mlk", group="g1")
    path = f"/messages/{m['partitionId']}/{m['transactionId']}"
    before = admin.snapshot()
    res = admin.delete(path)
    assert res.status_code == 409 and res.json["leasedBy"] == ["g1"]
    assert "g1" in res.json["error"]
    assert admin.snapshot() == before
    admin.ack(m)
    assert admin.delete(path).status_code == 200


def test_delete_bad_input(admin: AdminApi) -> None:
    [m] = admin.push("mbad", [1])
    before = admin.snapshot()
    assert admin.delete(f"/messages/not-a-uuid/{m['transactionId']}").status_code == 400
    assert admin.delete(f"/messages/{uuid.uuid4()}/{m['transactionId']}").status_code == 404
    assert admin.delete(f"/messages/{m['partition_id']}/{'x' * 2000}").status_code == 400
    assert admin.snapshot() == before
