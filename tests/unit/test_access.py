"""The route-access table covers every route the app serves, and nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import falcon
import falcon.routing
import pytest

from queen_threads.app import create_app
from queen_threads.auth import Role
from queen_threads.http.access import ROUTES, Rule, required
from queen_threads.runtime import Runtime
from queen_threads.settings import load_settings


def served(app: falcon.App) -> Iterator[tuple[str, str, Any]]:
    """(method, uri template, resource) of every responder the router holds."""

    def walk(nodes: list[Any]) -> Iterator[tuple[str, str, Any]]:
        for node in nodes:
            if node.resource is not None:
                for method in falcon.routing.map_http_methods(node.resource):
                    yield method, node.uri_template, node.resource
            yield from walk(node.children)

    yield from walk(app._router._roots)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> falcon.App:
    """The real app around a runtime that is never started (no database is touched)."""
    folder = tmp_path_factory.mktemp("access")
    settings = load_settings({"FILE_BUFFER_DIR": str(folder / "buffers")}, dotenv_path=None)
    return create_app(Runtime(settings, "postgresql://127.0.0.1:1/unused"))


def test_every_served_route_has_a_row(app: falcon.App) -> None:
    routes = list(served(app))
    assert len(routes) > 40
    missing = [(m, t) for m, t, _ in routes if m not in ROUTES.get(t, {})]
    assert not missing, f"routes without an access rule in http/access.py: {missing}"


def test_every_row_is_a_served_route(app: falcon.App) -> None:
    routes = {(m, t) for m, t, _ in served(app)}
    rows = {(m, t) for t, methods in ROUTES.items() for m in methods}
    assert not rows - routes, f"rules for routes the app does not serve: {rows - routes}"


@pytest.mark.parametrize(
    ("method", "template", "access"),
    [("GET", "/api/v1/system/maintenance", Role.ADMIN),
     ("POST", "/api/v1/system/maintenance/pop", Role.ADMIN),
     ("DELETE", "/api/v1/consumer-groups/{group}", Role.ADMIN),
     ("DELETE", "/api/v1/consumer-groups/{group}/queues/{queue}", Role.ADMIN),
     ("DELETE", "/api/v1/resources/queues/{queue}", Role.ADMIN),
     ("GET", "/api/v1/resources/queues/{queue}", Role.READ_ONLY),
     ("GET", "/api/v1/consumer-groups/{group}", Role.READ_ONLY),
     ("GET", "/api/v1/dlq", Role.READ_ONLY),
     ("GET", "/api/v1/traces/names", Role.READ_ONLY),
     ("GET", "/api/v1/status/queues/{queue}", Role.READ_ONLY),
     ("GET", "/api/v1/messages/{partitionId}/{transactionId}", Role.READ_ONLY),
     ("DELETE", "/api/v1/messages/{partitionId}/{transactionId}", Role.READ_WRITE),
     ("POST", "/api/v1/traces", Role.READ_WRITE),
     ("POST", "/api/v1/consumer-groups/{group}/subscription", Role.READ_WRITE),
     ("GET", "/api/v1/pop/queue/{queue}", Role.READ_WRITE),
     ("POST", "/api/v1/push", Role.READ_WRITE),
     ("POST", "/api/v1/lease/{leaseId}/extend", Role.READ_WRITE),
     ("POST", "/api/v1/kv", Role.READ_WRITE),
     ("GET", "/api/v1/kv/{ns}/{key:path}", Role.READ_ONLY),
     ("PUT", "/api/v1/kv/{ns}/{key:path}", Role.READ_WRITE),
     ("DELETE", "/api/v1/kv/{ns}/{key:path}", Role.READ_WRITE),
     ("POST", "/api/v1/locks", Role.READ_WRITE),
     ("POST", "/internal/api/notify", Rule.PEER)],
)  # fmt: skip
def test_levels_follow_the_contract(app: falcon.App, method: str, template: str,
                                    access: Role | Rule) -> None:  # fmt: skip
    resource = next(r for m, t, r in served(app) if (m, t) == (method, template))
    assert required(method, template, resource) is access


def test_no_responder_needs_any_token_and_an_unlisted_responder_admin() -> None:
    class Resource:
        def on_get(self) -> None: ...

    assert required("PUT", "/api/v1/push", Resource()) is Role.READ_ONLY  # 405
    assert required("GET", "/api/v1/new-route", Resource()) is Role.ADMIN  # fail closed


def test_only_the_peer_route_takes_the_peer_secret() -> None:
    peer = {t for t, methods in ROUTES.items() if Rule.PEER in methods.values()}
    assert peer == {"/internal/api/notify"}
    assert all(t.startswith("/internal/") for t in peer)
