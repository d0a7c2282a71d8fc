"""Unknown query parameters are ignored on every route family and named in the
`Queen-Ignored-Parameters` header and /metrics (http/ignored.py); a known parameter with a
bad value is still a 400 that changes nothing; every parameter the official client sends is
known."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import API, AdminApi

PID = "00000000-0000-0000-0000-000000000001"
IGNORED = "Queen-Ignored-Parameters"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/pop/queue/pq", None),
        ("GET", "/pop/queue/pq/partition/Default", None),
        ("GET", "/pop", None),
        ("POST", "/push", {"items": [{"queue": "pq", "payload": 1}]}),
        ("POST", "/ack", {"transactionId": "t", "partitionId": PID}),
        ("POST", "/transaction", {"operations": [{"type": "push",
                                                  "items": [{"queue": "pq", "payload": 2}]}]}),
        ("POST", "/configure", {"queue": "pq2"}),
        ("POST", "/lease/x/extend", None),
        ("GET", "/dlq", None),
        ("GET", "/consumer-groups", None),
        ("DELETE", "/consumer-groups/g", None),
        ("GET", "/traces/names", None),
        ("GET", "/resources/queues", None),
        ("DELETE", "/resources/queues/pq", None),
        ("GET", "/status", None),
        ("GET", "/system/maintenance", None),
    ],
)  # fmt: skip
def test_an_unknown_parameter_is_ignored_and_named(
    admin: AdminApi, method: str, path: str, body: Any
) -> None:
    """The same request with and without an unknown parameter: the same answer, and the
    one with it names the parameter in the header and counts it in /metrics."""
    known = "autoAck=true&wait=false" if path.startswith("/pop") else ""  # no lease left over
    admin.push("pq", [0])
    route = admin.client.simulate_request(method, f"{API}{path}", query_string=known, json=body)
    admin.push("pq", [0])
    query = "&".join(filter(None, [known, "bogus=1"]))
    res = admin.client.simulate_request(method, f"{API}{path}", query_string=query, json=body)
    assert res.status_code == route.status_code, (res.text, route.text)
    assert res.headers[IGNORED] == "query:bogus"
    assert IGNORED not in route.headers
    counted = admin.client.simulate_get("/metrics").json["ignoredParameters"]
    assert any(names.get("query:bogus") == 1 for names in counted.values()), counted


@pytest.mark.parametrize("path", ["/health", "/metrics", "/metrics/prometheus"])
def test_operations_routes_ignore_them_too(admin: AdminApi, path: str) -> None:
    res = admin.client.simulate_get(path, query_string="verbose=1")
    assert res.status_code == 200 and res.headers[IGNORED] == "query:verbose"


def test_the_header_names_every_unknown_parameter_and_the_known_ones_still_apply(
    admin: AdminApi,
) -> None:
    admin.configure("lq")
    res = admin.get("/consumer-groups/lagging", minLag="5", x="1", minLagSeconds="bad")
    assert res.status_code == 400 and "minLagSeconds" in res.json["error"]
    res = admin.get("/consumer-groups/lagging", minLag="5", x="1", minLagSeconds="60")
    assert res.status_code == 200 and res.headers[IGNORED] == "query:minLag, query:x"


def test_a_name_of_any_character_is_percent_encoded_in_the_header(admin: AdminApi) -> None:
    res = admin.client.simulate_get("/health", query_string="a%0D%0Ab=1&%C3%A9t%C3%A9=2")
    assert res.status_code == 200
    assert res.headers[IGNORED] == "query:a%0D%0Ab, query:%C3%A9t%C3%A9"


def test_a_known_parameter_with_a_bad_value_is_400_and_changes_nothing(admin: AdminApi) -> None:
    admin.push("bq", [1, 2])
    before = admin.snapshot()
    res = admin.get("/pop/queue/bq", batch="x", autopilot="true", wait="false")
    assert res.status_code == 400 and "batch" in res.json["error"]
    assert admin.snapshot() == before


def test_what_the_official_client_sends_is_accepted(admin: AdminApi) -> None:
    """The parameters of the client's fixed code paths, all at once, on each route."""
    admin.configure("cq", retryLimit=0)
    admin.push("cq", [1, 2, 3], partition="p1")
    pop_all = {
        "batch": "2", "wait": "false", "timeout": "1000", "consumerGroup": "g",
        "autoAck": "true", "subscriptionMode": "all", "subscriptionFrom": "now",
        "partitions": "2", "namespace": "cq", "task": "",
    }  # fmt: skip
    for path in ("/pop/queue/cq", "/pop/queue/cq/partition/p1", "/pop"):
        res = admin.get(path, **pop_all)
        assert res.status_code in (200, 204), (path, res.text)
    admin.fail_next("cq", partition="p1")
    calls = [
        ("GET", "/dlq", {"queue": "cq", "limit": "10", "offset": "0", "consumerGroup": "g",
                         "partition": "p1", "from": "2025-01-01T00:00:00Z",
                         "to": "2999-01-01T00:00:00Z"}),
        ("GET", "/messages", {"queue": "cq", "partition": "p1", "ns": "cq", "task": "x",
                              "status": "pending", "limit": "5", "offset": "0"}),
        ("GET", "/resources/partitions", {"queue": "cq", "limit": "5"}),
        ("GET", "/consumer-groups/lagging", {"minLagSeconds": "60"}),
        ("GET", "/traces/by-name/n", {"limit": "100", "offset": "0"}),
        ("GET", "/traces/names", {"limit": "50", "offset": "0"}),
        ("GET", "/status/queues", {"limit": "10", "offset": "0", "namespace": "cq"}),
        ("DELETE", "/consumer-groups/g/queues/cq", {"deleteMetadata": "false"}),
        ("DELETE", "/consumer-groups/g", {"deleteMetadata": "true"}),
        ("DELETE", "/queues/cq/clear", {"partition": "p1"}),
    ]  # fmt: skip
    for method, path, params in calls:
        res = admin.client.simulate_request(method, f"{API}{path}", params=params)
        assert res.status_code == 200, (method, path, res.text)
