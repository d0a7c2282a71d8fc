"""The query-parameter table covers every route the app serves, and nothing else; the
middleware ignores and names what a row does not list."""

from __future__ import annotations

import falcon
import falcon.testing
import pytest

from queen_threads.app import create_app
from queen_threads.http.query_params import NONE, PARAMS, POP, allowed
from queen_threads.runtime import Runtime
from queen_threads.settings import load_settings
from tests.unit.test_access import served


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> falcon.App:
    """The real app around a runtime that is never started (no database is touched)."""
    folder = tmp_path_factory.mktemp("params")
    settings = load_settings({"FILE_BUFFER_DIR": str(folder / "buffers")}, dotenv_path=None)
    return create_app(Runtime(settings, "postgresql://127.0.0.1:1/unused"))


def test_every_served_route_has_a_row(app: falcon.App) -> None:
    routes = list(served(app))
    assert len(routes) > 40
    missing = [(m, t) for m, t, _ in routes if m not in PARAMS.get(t, {})]
    assert not missing, f"routes without a row in http/query_params.py: {missing}"


def test_every_row_is_a_served_route(app: falcon.App) -> None:
    routes = {(m, t) for m, t, _ in served(app)}
    rows = {(m, t) for t, methods in PARAMS.items() for m in methods}
    assert not rows - routes, f"rows for routes the app does not serve: {rows - routes}"


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
    method: str, template: str, names: set[str]
) -> None:
    known = PARAMS[template][method]
    assert set(names) <= known, sorted(set(names) - known)


def test_pop_takes_every_option_the_client_has() -> None:
    expected = {
        "batch", "wait", "timeout", "consumerGroup", "autoAck", "partitions",
        "subscriptionMode", "subscriptionFrom", "namespace", "task",
        "autopilot", "leaseSeconds", "conflation",  # queen-mq 2.6.0
    }  # fmt: skip
    assert expected == POP


def test_a_method_the_resource_does_not_serve_is_left_to_falcon() -> None:
    class Resource:
        def on_get(self) -> None: ...

    assert allowed("PUT", "/api/v1/push", Resource()) is None  # 405
    assert allowed("GET", "/api/v1/new-route", Resource()) is NONE  # fail closed


def test_the_middleware_ignores_and_names_unknown_parameters(app: falcon.App) -> None:
    client = falcon.testing.TestClient(app)
    res = client.simulate_get("/api/v1/system/maintenance", query_string="foo=1&bar")
    assert res.status_code != 400
    assert res.headers["Queen-Ignored-Parameters"] == "query:bar, query:foo"
    res = client.simulate_put("/api/v1/push", query_string="x=1")
    assert res.status_code == 405  # no row for the method: falcon's answer, not ours
    res = client.simulate_get("/nowhere", query_string="x=1")
    assert res.status_code == 404
