"""Status routes (/api/v1/status, /status/queues, /status/queues/{queue},
/resources/overview) and the JSON /metrics, through HTTP on the whole application with a
real PostgreSQL; bad query parameters are a 400 and an unknown queue a 404."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from queen_threads.background.exclusive import session
from queen_threads.background.retention import cleanup_messages
from tests.integration.conftest import AdminApi


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def age(admin: AdminApi, queue: str, seconds: int) -> None:
    """Move every timestamp of a queue `seconds` into the past (order unchanged)."""
    shift = f"{seconds} seconds"
    admin.sql(
        """UPDATE queen.messages m SET created_at = m.created_at - %s::interval
             FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
            WHERE m.partition_id = p.id AND q.name = %s""",
        shift,
        queue,
    )
    admin.sql(
        """UPDATE queen.partition_lookup pl
              SET last_message_created_at = pl.last_message_created_at - %s::interval
             FROM queen.queues q WHERE q.id = pl.queue_id AND q.name = %s""",
        shift,
        queue,
    )


@pytest.fixture
def shop(admin: AdminApi) -> AdminApi:
    """shop.orders: 6 messages, 2 completed, 2 in a live lease, 2 pending;
    shop.refunds: 1 dead-lettered; billing: 3 pending, pushed 2 hours ago."""
    admin.configure("shop.orders")
    admin.push("shop.orders", [1, 2, 3, 4, 5, 6])
    for m in admin.pop("shop.orders", batch=2):
        admin.ack(m)
    admin.pop("shop.orders", batch=2)  # leased, not acked
    admin.dead_letter("shop.refunds", [{"r": 1}], error="card declined")
    admin.push("billing", [7, 8, 9])
    age(admin, "billing", 7200)
    return admin


def test_status_counts_messages_and_throughput_of_the_last_hour(shop: AdminApi) -> None:
    res = shop.get("/status")
    assert res.status_code == 200, res.text
    body = res.json
    assert body["queues"] == 3 and body["partitions"] == 3
    assert body["messages"] == {
        "total": 10, "pending": 5, "processing": 2, "completed": 3, "deadLettered": 1,
        "oldestPendingAt": body["messages"]["oldestPendingAt"],
    }  # fmt: skip
    assert body["leases"] == {"active": 1}
    assert body["deadLetterQueue"]["total"] == 1
    assert body["deadLetterQueue"]["topErrors"] == [{"error": "card declined", "count": 1}]
    t = body["throughput"]
    assert t["bucket"] == "minute"
    assert t["ingested"] == 7  # billing's 3 are two hours old: outside the default hour
    assert t["deadLettered"] == 1
    assert sum(p["ingested"] for p in t["series"]) == 7
    assert 55 <= len(t["series"]) <= 61
    assert t["ingestedPerSecond"] == pytest.approx(7 / 3600, abs=1e-3)
    start = datetime.fromisoformat(body["timeRange"]["from"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(body["timeRange"]["to"].replace("Z", "+00:00"))
    assert end - start == timedelta(hours=1)


def test_status_filters_and_explicit_range(shop: AdminApi) -> None:
    ns = shop.get("/status", namespace="shop").json
    assert ns["queues"] == 2 and ns["messages"]["total"] == 7
    assert ns["filters"] == {"queue": None, "namespace": "shop", "task": None}
    one = shop.get("/status", queue="billing").json
    assert one["queues"] == 1 and one["messages"]["pending"] == 3
    none = shop.get("/status", queue="nothing-here").json
    assert none["queues"] == 0 and none["messages"]["total"] == 0
    now = datetime.now(UTC)
    wide = shop.get("/status", **{"from": iso(now - timedelta(hours=3)), "to": iso(now)}).json
    assert wide["throughput"]["ingested"] == 10
    assert wide["throughput"]["bucket"] == "minute"
    week = shop.get("/status", **{"from": iso(now - timedelta(days=3))}).json
    assert week["throughput"]["bucket"] == "hour"
    month = shop.get("/status", **{"from": iso(now - timedelta(days=30))}).json
    assert month["throughput"]["bucket"] == "day"


def test_status_reports_what_retention_deleted(shop: AdminApi, migrated_dsn: str) -> None:
    shop.configure("billing", retentionEnabled=True, retentionSeconds=60)
    with session(migrated_dsn, 30000, 5000) as s:
        assert cleanup_messages(s, "retention", 10).deleted == 3
    body = shop.get("/status", queue="billing").json
    assert body["retention"] == {
        "deleted": 3, "byType": {"retention": {"messages": 3, "records": 1}},
    }  # fmt: skip
    detail = shop.get("/status/queues/billing").json
    [record] = detail["retention"]["recent"]
    assert record["type"] == "retention" and record["messagesDeleted"] == 3
    overview = shop.get("/resources/overview").json
    assert overview["retention"]["deletedLast24h"] == 3


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/status", {"from": "yesterday"}),
        ("/status", {"to": "2025-13-45"}),
        ("/status", {"from": "2025-02-01T00:00:00Z", "to": "2025-01-01T00:00:00Z"}),
        ("/status", {"from": "2020-01-01T00:00:00Z", "to": "2025-01-01T00:00:00Z"}),
        ("/status", {"queue": "bad queue name"}),
        ("/status", {"namespace": "x" * 300}),
        ("/status/queues", {"limit": "0"}),
        ("/status/queues", {"limit": "ten"}),
        ("/status/queues", {"offset": "-1"}),
        ("/status/queues", {"task": "a b"}),
        ("/status/queues/billing", {"from": "not a time"}),
    ],
)
def test_bad_query_parameters_are_a_400(shop: AdminApi, path: str, params: dict[str, Any]) -> None:
    res = shop.get(path, **params)
    assert res.status_code == 400, res.text
    assert isinstance(res.json["error"], str) and res.json["error"]


def test_status_queues_pages_by_name(shop: AdminApi) -> None:
    first = shop.get("/status/queues", limit=2).json
    assert [q["name"] for q in first["queues"]] == ["billing", "shop.orders"]
    assert first["total"] == 3 and first["pagination"] == {"limit": 2, "offset": 0}
    rest = shop.get("/status/queues", limit=2, offset=2).json
    assert [q["name"] for q in rest["queues"]] == ["shop.refunds"]
    orders = first["queues"][1]
    assert orders["namespace"] == "shop" and orders["task"] == "orders"
    assert orders["messages"]["total"] == 6 and orders["messages"]["processing"] == 2
    assert orders["throughput"]["ingested"] == 6
    assert orders["consumerGroups"] == 1 and orders["leases"] == {"active": 1}
    billing = first["queues"][0]
    assert billing["throughput"]["ingested"] == 0  # pushed before the default hour
    by_ns = shop.get("/status/queues", namespace="shop").json
    assert [q["name"] for q in by_ns["queues"]] == ["shop.orders", "shop.refunds"]


def test_status_queue_detail(shop: AdminApi) -> None:
    shop.push("shop.orders", [10], partition="eu")
    for m in shop.pop("shop.orders", batch=1, group="audit", partition="Default"):
        shop.ack(m)
    res = shop.get("/status/queues/shop.orders")
    assert res.status_code == 200, res.text
    body = res.json
    assert body["queue"]["name"] == "shop.orders"
    assert body["queue"]["options"]["retentionEnabled"] is False
    assert body["totals"]["partitions"] == 2
    assert body["totals"]["messages"]["total"] == 7
    assert body["totals"]["throughput"]["ingested"] == 7
    parts = {p["name"]: p for p in body["partitions"]}
    default = parts["Default"]
    assert default["messages"] == {
        "total": 6, "pending": 2, "processing": 2, "completed": 2,
        "oldestPendingAt": default["messages"]["oldestPendingAt"],
    }  # fmt: skip
    consumers = {c["consumerGroup"]: c for c in default["consumers"]}
    assert consumers["__QUEUE_MODE__"]["lag"] == 4 and consumers["__QUEUE_MODE__"]["leaseActive"]
    assert consumers["audit"]["lag"] == 5 and not consumers["audit"]["leaseActive"]
    # queue mode is registered for the queue (it popped it), so the new partition has its
    # cursor row from its first message on (the ready index, migration 0019), not yet read
    [eu_queue_mode] = parts["eu"]["consumers"]
    assert eu_queue_mode["consumerGroup"] == "__QUEUE_MODE__" and eu_queue_mode["lag"] == 1
    assert not eu_queue_mode["leaseActive"] and parts["eu"]["messages"]["pending"] == 1
    groups = {g["consumerGroup"]: g for g in body["consumerGroups"]}
    assert groups["audit"]["lag"] == 5 and groups["__QUEUE_MODE__"]["activeLeases"] == 1


def test_unknown_queue_is_a_404_and_a_bad_name_a_400(shop: AdminApi) -> None:
    res = shop.get("/status/queues/no-such-queue")
    assert res.status_code == 404
    assert "no-such-queue" in res.json["error"]
    assert shop.get("/status/queues/bad%20name").status_code == 400


def test_resources_overview(shop: AdminApi) -> None:
    res = shop.get("/resources/overview")
    assert res.status_code == 200, res.text
    body = res.json
    assert body["queues"] == 3 and body["partitions"] == 3
    assert body["namespaces"] == 2 and body["tasks"] == 2  # shop, billing / orders, refunds
    assert body["consumerGroups"] == 1
    assert body["messages"]["total"] == 10 and body["messages"]["deadLettered"] == 1
    assert body["leases"] == {"active": 1}
    assert body["lastPushAt"].endswith("Z")
    assert isinstance(body["retention"]["services"], dict)


def test_json_metrics_count_this_process_messages_and_queries(admin: AdminApi) -> None:
    before = admin.client.simulate_get("/metrics").json
    admin.push("metered", [1, 2, 3])
    for m in admin.pop("metered", batch=2):
        admin.ack(m)
    body = admin.client.simulate_get("/metrics").json
    msgs = body["messages"]
    assert msgs["pushed"]["total"] - before["messages"]["pushed"]["total"] == 3
    assert msgs["popped"]["total"] - before["messages"]["popped"]["total"] == 2
    assert msgs["acked"]["total"] - before["messages"]["acked"]["total"] == 2
    assert msgs["total"] == msgs["pushed"]["total"] and msgs["rate"] > 0
    queries = body["database"]["queries"]
    assert queries["total"] > before["database"]["queries"]["total"]
    assert set(queries["latencyMs"]) == {"p50", "p95", "p99"}
    assert body["requests"]["total"] > before["requests"]["total"]
    assert set(body["background"]) == {"retention", "eviction", "metrics", "kvSweep"}
    assert set(body["analytics"]) == {"flushIntervalS", "flushes", "failures"}
    assert "pending" in body["buffer"]


def test_prometheus_text_in_a_single_process(admin: AdminApi) -> None:
    admin.push("single", [1])
    res = admin.client.simulate_get("/metrics/prometheus")
    assert res.status_code == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(res.text)
        for s in fam.samples
    }
    assert samples[("queen_queue_depth", (("queue", "single"),))] == 1
    pushed = ("queen_messages_pushed_total", (("queue", "single"), ("status", "queued")))
    assert samples[pushed] >= 1
