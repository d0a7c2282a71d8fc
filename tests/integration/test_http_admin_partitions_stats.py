"""GET /api/v1/resources/partitions and POST /api/v1/stats/refresh through HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import AdminApi


def setup(admin: AdminApi) -> None:
    admin.configure("billing.invoices", retryLimit=0)
    admin.push("billing.invoices", [1, 2, 3], partition="eu")
    admin.push("billing.invoices", [4], partition="us")
    admin.push("shop.orders", [5])
    [done] = admin.pop("billing.invoices", partition="eu")
    admin.ack(done)  # queue mode consumed 1
    admin.fail_next("billing.invoices", partition="eu")  # 2 dead-lettered
    admin.pop("billing.invoices", partition="eu")  # 3 leased
    [g] = admin.pop("billing.invoices", group="audit", partition="eu")
    admin.ack(g)  # the audit group consumed 1 of eu


def names(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["queue"], p["name"]) for p in body["partitions"]]


def test_partitions_of_a_queue_with_counts_groups_and_activity(admin: AdminApi) -> None:
    setup(admin)
    body = admin.get("/resources/partitions", queue="billing.invoices").json
    assert names(body) == [("billing.invoices", n) for n in ("Default", "eu", "us")]
    assert body["total"] == 3 and body["pagination"] == {"limit": 100, "offset": 0}
    eu = body["partitions"][1]
    assert (eu["namespace"], eu["task"]) == ("billing", "invoices")
    assert eu["messages"] == {"total": 3, "pending": 0, "processing": 1, "completed": 2,
                              "deadLettered": 1}  # fmt: skip
    assert eu["id"] and eu["createdAt"].endswith("Z") and eu["lastActivity"].endswith("Z")
    assert eu["lastMessageAt"].endswith("Z")
    groups = {g["consumerGroup"]: g for g in eu["consumerGroups"]}
    assert list(groups) == ["__QUEUE_MODE__", "audit"]
    assert groups["__QUEUE_MODE__"]["lag"] == 1 and groups["__QUEUE_MODE__"]["leaseActive"]
    assert groups["audit"]["lag"] == 2 and groups["audit"]["leaseActive"] is False
    assert groups["audit"]["lastConsumedAt"].endswith("Z")
    default = body["partitions"][0]
    assert default["consumerGroups"] == [] and default["lastMessageAt"] is None
    assert default["messages"]["total"] == 0


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, [("billing.invoices", "Default"), ("billing.invoices", "eu"),
              ("billing.invoices", "us"), ("shop.orders", "Default")]),
        ({"namespace": "shop"}, [("shop.orders", "Default")]),
        ({"task": "invoices", "limit": "1", "offset": "1"}, [("billing.invoices", "eu")]),
        ({"queue": "missing"}, []),
    ],
)  # fmt: skip
def test_partition_filters_and_paging(
    admin: AdminApi, params: dict[str, str], expected: list[tuple[str, str]]
) -> None:
    setup(admin)
    body = admin.get("/resources/partitions", **params).json
    assert names(body) == expected


@pytest.mark.parametrize("params", [{"limit": "0"}, {"offset": "-1"}, {"queue": "bad name"}])
def test_partition_bad_query_is_400(admin: AdminApi, params: dict[str, str]) -> None:
    res = admin.get("/resources/partitions", **params)
    assert res.status_code == 400 and res.json["error"]


def test_stats_refresh_analyzes_the_tables_and_answers_totals(admin: AdminApi) -> None:
    admin.push("st", [1, 2, 3])
    reltuples = "SELECT reltuples FROM pg_class WHERE oid = 'queen.messages'::regclass"
    assert admin.sql(reltuples) != [(3.0,)]  # never analyzed since the rows came
    for res in (admin.post("/stats/refresh"), admin.post("/stats/refresh", {})):
        assert res.status_code == 200, res.text
        body = res.json
        assert body["success"] is True and body["durationMs"] >= 0
        assert {"queen.messages", "queen.queues", "queen.partition_consumers"} <= set(
            body["analyzedTables"]
        )
        assert body["totals"]["messages"]["total"] == 3 and body["totals"]["queues"] == 1
    assert admin.sql(reltuples) == [(3.0,)]  # the planner now knows (ANALYZE really ran)


@pytest.mark.parametrize(
    ("body", "query", "ignored"),
    [({"all": True}, None, "body:all"), (None, "force=1", "query:force")],
)
def test_stats_refresh_ignores_and_names_options(
    admin: AdminApi, body: dict[str, Any] | None, query: str | None, ignored: str
) -> None:
    if query:
        res = admin.client.simulate_post("/api/v1/stats/refresh", query_string=query)
    else:
        res = admin.post("/stats/refresh", body)
    assert res.status_code == 200 and res.headers["Queen-Ignored-Parameters"] == ignored
