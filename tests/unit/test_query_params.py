"""The query-parameter table covers every route the app serves, and nothing else; the
middleware ignores and names what a row does not list."""

from __future__ import annotations

import falcon
import falcon.testing
import pytest

from queen_threads.http.routes import NONE, RouteTable
from queen_threads.queue.routes.pop import PARAMS as POP
from tests.support.routes import rows, served


def test_every_served_route_has_a_row(app: falcon.App, table: RouteTable) -> None:
    routes = list(served(app))
    assert len(routes) > 40
    missing = [(m, t) for m, t, _ in routes if table.method(m, t) is None]
    assert not missing, f"routes without a row: {missing}"


def test_every_row_is_a_served_route(app: falcon.App, table: RouteTable) -> None:
    routes = {(m, t) for m, t, _ in served(app)}
    declared = {(m, t) for t, methods in table.by_path.items() for m in methods}
    assert not declared - routes, f"rows for routes the app does not serve: {declared - routes}"


# What the official client (queen-mq 0.15.0) sends on its fixed code paths.
CLIENT_SENDS = [
    ("GET", "/api/v1/pop/queue/{queue}", POP),
    ("GET", "/api/v1/pop/queue/{queue}/partition/{partition}", POP),
    ("GET", "/api/v1/pop", POP),
    ("GET", "/api/v1/dlq",
     {"queue", "limit", "offset", "consumerGroup", "partition", "from", "to"}),
    ("GET", "/api/v1/consumer-groups/lagging", {"minLagSeconds"}),
    ("DELETE", "/api/v1/consumer-groups/{group}", {"deleteMetadata"}),
    ("DELETE", "/api/v1/consumer-groups/{group}/queues/{queue}", {"deleteMetadata"}),
    ("DELETE", "/api/v1/queues/{queue}/clear", {"partition"}),
    ("GET", "/api/v1/messages", {"queue", "partition", "ns", "task", "status", "limit", "offset"}),
    ("GET", "/api/v1/resources/partitions", {"queue", "limit", "offset"}),
    ("GET", "/api/v1/traces/by-name/{name}", {"limit", "offset"}),
    ("GET", "/api/v1/traces/names", {"limit", "offset"}),
]  # fmt: skip


@pytest.mark.parametrize(("method", "template", "names"), CLIENT_SENDS)
def test_what_the_official_client_sends_is_known(
    table: RouteTable, method: str, template: str, names: set[str]
) -> None:
    known = rows(table)[template][method].params
    assert set(names) <= known, sorted(set(names) - known)


def test_pop_takes_every_option_the_client_has() -> None:
    expected = {
        "batch", "wait", "timeout", "consumerGroup", "autoAck", "partitions",
        "subscriptionMode", "subscriptionFrom", "namespace", "task",
        "autopilot", "leaseSeconds", "conflation",  # queen-mq 2.6.0
    }  # fmt: skip
    assert expected == POP


def test_a_method_the_resource_does_not_serve_is_left_to_falcon(table: RouteTable) -> None:
    class Resource:
        def on_get(self) -> None: ...

    assert table.params("PUT", "/api/v1/push", Resource()) is None  # 405
    assert table.params("GET", "/api/v1/new-route", Resource()) is NONE  # fail closed


def test_the_middleware_ignores_and_names_unknown_parameters(app: falcon.App) -> None:
    client = falcon.testing.TestClient(app)
    res = client.simulate_get("/api/v1/system/maintenance", query_string="foo=1&bar")
    assert res.status_code != 400
    assert res.headers["Queen-Ignored-Parameters"] == "query:bar, query:foo"
    res = client.simulate_put("/api/v1/push", query_string="x=1")
    assert res.status_code == 405  # no row for the method: falcon's answer, not ours
    res = client.simulate_get("/nowhere", query_string="x=1")
    assert res.status_code == 404
