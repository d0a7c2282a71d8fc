"""Consumer-group routes through HTTP: summaries with lag, lagging partitions, delete,
subscription timestamp and seek."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import AdminApi

QM = "__QUEUE_MODE__"


def consume(admin: AdminApi, queue: str, n: int, group: str | None = None, **kw: Any) -> list[Any]:
    """Pop and ack n messages one by one; returns their payloads."""
    out = []
    for _ in range(n):
        [m] = admin.pop(queue, group=group, **kw)
        admin.ack(m)
        out.append(m["data"])
    return out


def group(admin: AdminApi, name: str) -> dict[str, Any]:
    res = admin.get(f"/consumer-groups/{name}")
    assert res.status_code == 200, res.text
    return dict(res.json)


def backdate(admin: AdminApi, seconds: int) -> None:
    """Make every message (and the cursors pointing at them) `seconds` older."""
    admin.sql(
        "UPDATE queen.messages SET created_at = created_at - make_interval(secs => %s)", seconds
    )
    admin.sql(
        "UPDATE queen.partition_lookup SET last_message_created_at ="
        " last_message_created_at - make_interval(secs => %s)",
        seconds,
    )
    admin.sql(
        "UPDATE queen.partition_consumers SET last_consumed_created_at ="
        " last_consumed_created_at - make_interval(secs => %s)",
        seconds,
    )


# --------------------------------------------------------------------------- summaries


def test_list_reports_lag_members_topics_and_subscriptions(admin: AdminApi) -> None:
    admin.push("cg", [1, 2, 3], partition="P1")
    admin.push("cg", [4, 5], partition="P2")
    admin.push("cg2", [6])
    assert consume(admin, "cg", 2, "g1", partition="P1") == [1, 2]
    assert consume(admin, "cg2", 1) == [6]
    res = admin.get("/consumer-groups")
    assert res.status_code == 200
    by_name = {g["name"]: g for g in res.json}
    assert set(by_name) == {"g1", QM}
    g1 = by_name["g1"]
    assert g1["topics"] == ["cg"]
    assert (g1["members"], g1["totalLag"], g1["partitionsWithLag"]) == (1, 3, 2)
    assert g1["state"] == "Stable" and 0 <= g1["maxTimeLag"] < 60
    [q] = g1["queues"]
    assert (q["queue"], q["partitions"], q["members"], q["totalLag"]) == ("cg", 2, 1, 3)
    assert "partitionDetails" not in q
    assert [(s["queue"], s["partition"], s["mode"]) for s in g1["subscriptions"]] == [
        ("cg", "P1", "all")
    ]
    qm = by_name[QM]
    assert (qm["topics"], qm["totalLag"], qm["subscriptions"]) == (["cg2"], 0, [])


def test_new_subscription_counts_only_later_messages(admin: AdminApi) -> None:
    admin.push("cn", [1, 2])
    res = admin.get("/pop/queue/cn", consumerGroup="late", subscriptionMode="new")
    assert res.status_code == 204
    admin.push("cn", [3])
    g = group(admin, "late")
    assert g["totalLag"] == 1 and g["subscriptions"][0]["mode"] == "new"
    assert g["subscriptions"][0]["timestamp"].endswith("Z")


def test_states_stable_lagging_dead(admin: AdminApi) -> None:
    admin.push("cs", [1, 2])
    consume(admin, "cs", 1, "g1")
    assert group(admin, "g1")["state"] == "Stable"
    backdate(admin, 120)
    g = group(admin, "g1")
    assert g["state"] == "Lagging" and g["maxTimeLag"] >= 120
    admin.sql(
        "UPDATE queen.partition_consumers SET last_consumed_at = now() - interval '2 hours',"
        " created_at = now() - interval '2 hours'"
    )
    admin.sql("UPDATE queen.consumer_groups_metadata SET created_at = now() - interval '2 hours'")
    assert group(admin, "g1")["state"] == "Dead"


def test_detail_has_partition_states_and_unknown_is_404(admin: AdminApi) -> None:
    admin.push("cd", [1, 2], partition="A")
    admin.push("cd", [3], partition="B")
    [leased] = admin.pop("cd", group="g1", partition="A")
    g = group(admin, "g1")
    [q] = g["queues"]
    parts = {p["partition"]: p for p in q["partitionDetails"]}
    assert parts["A"]["hasCursor"] and parts["A"]["leaseActive"] and parts["A"]["lag"] == 2
    assert parts["A"]["leaseExpiresAt"].endswith("Z")
    assert not parts["B"]["hasCursor"] and parts["B"]["lag"] == 1
    assert leased["data"] == 1
    assert admin.get(f"/consumer-groups/{QM}").status_code == 404  # queue mode never read
    res = admin.get("/consumer-groups/nobody")
    assert res.status_code == 404 and "nobody" in res.json["error"]
    assert admin.get("/consumer-groups/bad%20name").status_code == 400


def test_lagging_lists_partitions_over_the_threshold(admin: AdminApi) -> None:
    admin.push("cl", [1, 2, 3])
    consume(admin, "cl", 1, "g1")
    consume(admin, "cl", 3, "g2")
    assert admin.get("/consumer-groups/lagging").json == []  # default 60 s
    [row] = admin.get("/consumer-groups/lagging", minLagSeconds=0).json
    assert (row["consumerGroup"], row["queue"], row["partition"], row["lag"]) == (
        "g1", "cl", "Default", 2,
    )  # fmt: skip
    backdate(admin, 3600)
    [row] = admin.get("/consumer-groups/lagging").json
    assert row["timeLagSeconds"] >= 3600 and row["oldestUnconsumedAt"].endswith("Z")
    assert admin.get("/consumer-groups/lagging", minLagSeconds=7200).json == []
    for bad in ("-1", "soon", "1.5"):
        res = admin.get("/consumer-groups/lagging", minLagSeconds=bad)
        assert res.status_code == 400 and "minLagSeconds" in res.json["error"]


# --------------------------------------------------------------------------- delete


def test_delete_group_drops_cursors_and_metadata_on_every_queue(admin: AdminApi) -> None:
    admin.push("da", [1, 2])
    admin.push("db", [3])
    consume(admin, "da", 2, "g1")
    consume(admin, "db", 1, "g1")
    consume(admin, "da", 1, "g2")
    res = admin.delete("/consumer-groups/g1")
    assert res.status_code == 200
    assert res.json == {
        "success": True, "consumerGroup": "g1", "deletedPartitions": 2, "metadataDeleted": True,
    }  # fmt: skip
    assert admin.get("/consumer-groups/g1").status_code == 404
    assert admin.get("/consumer-groups/g2").status_code == 200
    assert consume(admin, "da", 2, "g1") == [1, 2]  # starts over


def test_delete_group_can_keep_metadata_and_is_idempotent(admin: AdminApi) -> None:
    admin.push("dk", [1])
    consume(admin, "dk", 1, "g1")
    res = admin.delete("/consumer-groups/g1", deleteMetadata="false")
    assert res.json["deletedPartitions"] == 1 and res.json["metadataDeleted"] is False
    assert len(group(admin, "g1")["subscriptions"]) == 1
    again = admin.delete("/consumer-groups/g1")
    assert again.status_code == 200 and again.json["deletedPartitions"] == 0
    assert admin.delete("/consumer-groups/never-existed").status_code == 200


def test_delete_group_for_one_queue(admin: AdminApi) -> None:
    admin.push("qa", [1])
    admin.push("qb", [2])
    consume(admin, "qa", 1, "g1")
    consume(admin, "qb", 1, "g1")
    res = admin.delete("/consumer-groups/g1/queues/qa")
    assert res.status_code == 200
    assert (res.json["queue"], res.json["deletedPartitions"]) == ("qa", 1)
    g = group(admin, "g1")
    assert g["topics"] == ["qb"] and [s["queue"] for s in g["subscriptions"]] == ["qb"]
    assert consume(admin, "qa", 1, "g1") == [1]


def test_delete_bad_input_changes_nothing(admin: AdminApi) -> None:
    admin.push("dx", [1])
    consume(admin, "dx", 1, "g1")
    before = admin.snapshot()
    for res in (
        admin.delete("/consumer-groups/g1", deleteMetadata="maybe"),
        admin.delete("/consumer-groups/g1/queues/dx", deleteMetadata="2"),
        admin.delete("/consumer-groups/bad%20group"),
        admin.delete("/consumer-groups/g1/queues/bad%20queue"),
    ):
        assert res.status_code == 400 and res.json["error"]
    assert admin.snapshot() == before


# --------------------------------------------------------------------------- subscription


def test_subscription_timestamp_moves_where_new_cursors_start(admin: AdminApi) -> None:
    admin.push("sub", ["old"])
    consume(admin, "sub", 1, "g1")
    admin.sql("UPDATE queen.messages SET created_at = '2025-01-01T00:00:00Z'")
    admin.push("sub", ["new"])
    res = admin.post("/consumer-groups/g1/subscription", {"subscriptionTimestamp": "2025-06-01"})
    assert res.status_code == 200
    assert res.json == {
        "success": True, "consumerGroup": "g1", "newTimestamp": "2025-06-01T00:00:00.000Z",
        "rowsUpdated": 1,
    }  # fmt: skip
    [sub] = group(admin, "g1")["subscriptions"]
    assert (sub["mode"], sub["timestamp"]) == ("timestamp", "2025-06-01T00:00:00.000Z")
    admin.delete("/consumer-groups/g1", deleteMetadata="false")
    assert consume(admin, "sub", 1, "g1") == ["new"]  # the new cursor starts after 2025-06-01
    unknown = admin.post(
        "/consumer-groups/nobody/subscription", {"subscriptionTimestamp": "2025-01-01"}
    )
    assert unknown.status_code == 200 and unknown.json["rowsUpdated"] == 0


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (None, "subscriptionTimestamp is required"),
        ({}, "subscriptionTimestamp is required"),
        ({"subscriptionTimestamp": "last tuesday"}, "ISO-8601"),
        ({"subscriptionTimestamp": 1700000000}, "ISO-8601"),
        ({"subscriptionTimestamp": ""}, "ISO-8601"),
    ],
)
def test_subscription_bad_body_is_400(admin: AdminApi, body: Any, error: str) -> None:
    admin.push("sb", [1])
    consume(admin, "sb", 1, "g1")
    before = admin.snapshot()
    res = admin.post("/consumer-groups/g1/subscription", body)
    assert res.status_code == 400 and error in res.json["error"]
    assert admin.snapshot() == before


# --------------------------------------------------------------------------- seek


def test_seek_to_end_skips_everything_and_releases_the_lease(admin: AdminApi) -> None:
    admin.push("se", [1, 2, 3], partition="A")
    admin.push("se", [4], partition="B")
    [leased] = admin.pop("se", group="g1", partition="A")
    res = admin.post("/consumer-groups/g1/queues/se/seek", {"toEnd": True})
    assert res.status_code == 200
    assert res.json == {
        "success": True, "consumerGroup": "g1", "queue": "se", "partitionsUpdated": 2,
    }  # fmt: skip
    assert admin.pop("se", group="g1", batch=10) == []
    assert admin.sql(
        "SELECT count(*) FROM queen.partition_consumers WHERE lease_id IS NOT NULL"
    ) == [(0,)]
    admin.push("se", [5], partition="A")
    assert [m["data"] for m in admin.pop("se", group="g1", batch=10)] == [5]
    assert admin.ack(leased)["success"] is True  # the old delivery is already behind the cursor


def test_seek_to_a_timestamp_replays_later_messages(admin: AdminApi) -> None:
    pushed = admin.push("st", ["a", "b", "c"])
    for i, p in enumerate(pushed):
        admin.sql(
            "UPDATE queen.messages SET created_at = %s::timestamptz WHERE transaction_id = %s",
            f"2025-01-0{i + 1}T00:00:00Z",
            p["transactionId"],
        )
    assert consume(admin, "st", 3) == ["a", "b", "c"]
    res = admin.post(f"/consumer-groups/{QM}/queues/st/seek", {"timestamp": "2025-01-01T12:00:00Z"})
    assert res.status_code == 200 and res.json["partitionsUpdated"] == 1
    assert consume(admin, "st", 2) == ["b", "c"]
    admin.post(f"/consumer-groups/{QM}/queues/st/seek", {"timestamp": "2000-01-01T00:00:00Z"})
    assert consume(admin, "st", 3) == ["a", "b", "c"]


def test_seek_one_partition(admin: AdminApi) -> None:
    admin.push("sp", [1], partition="A")
    admin.push("sp", [2], partition="B")
    res = admin.post("/consumer-groups/g1/queues/sp/partitions/A/seek", {"toEnd": True})
    assert res.status_code == 200
    assert (res.json["partition"], res.json["partitionsUpdated"]) == ("A", 1)
    assert [m["data"] for m in admin.pop("sp", group="g1", batch=10)] == [2]


@pytest.mark.parametrize(
    ("path", "body", "status", "error"),
    [
        ("/consumer-groups/g1/queues/sx/seek", None, 400, "toEnd or timestamp is required"),
        ("/consumer-groups/g1/queues/sx/seek", {}, 400, "toEnd or timestamp is required"),
        ("/consumer-groups/g1/queues/sx/seek", {"toEnd": False}, 400, "toEnd or timestamp"),
        ("/consumer-groups/g1/queues/sx/seek", {"toEnd": "yes"}, 400, "boolean"),
        ("/consumer-groups/g1/queues/sx/seek", {"timestamp": "soon"}, 400, "ISO-8601"),
        ("/consumer-groups/g1/queues/sx/seek", {"toEnd": True, "timestamp": "2025-01-01"},
         400, "not both"),
        ("/consumer-groups/g1/queues/nosuch/seek", {"toEnd": True}, 404, "nosuch"),
        ("/consumer-groups/g1/queues/sx/partitions/Z/seek", {"toEnd": True}, 404, "Z"),
        ("/consumer-groups/bad%20group/queues/sx/seek", {"toEnd": True}, 400, "consumer group"),
    ],
)  # fmt: skip
def test_seek_bad_input_changes_nothing(
    admin: AdminApi, path: str, body: Any, status: int, error: str
) -> None:
    admin.push("sx", [1, 2])
    consume(admin, "sx", 1, "g1")
    before = admin.snapshot()
    res = admin.post(path, body)
    assert res.status_code == status and error in res.json["error"]
    assert admin.snapshot() == before
