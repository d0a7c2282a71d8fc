"""The route-access table covers every route the app serves, and nothing else."""

from __future__ import annotations

import falcon
import pytest

from queen_threads.auth import Role
from queen_threads.http.routes import RouteTable, Rule
from tests.support.routes import served


def test_every_served_route_has_a_row(app: falcon.App, table: RouteTable) -> None:
    routes = list(served(app))
    assert len(routes) > 40
    missing = [(m, t) for m, t, _ in routes if table.method(m, t) is None]
    assert not missing, f"routes without an access rule: {missing}"


def test_every_row_is_a_served_route(app: falcon.App, table: RouteTable) -> None:
    routes = {(m, t) for m, t, _ in served(app)}
    rows = {(m, t) for t, methods in table.by_path.items() for m in methods}
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
def test_levels_follow_the_contract(app: falcon.App, table: RouteTable, method: str,
                                    template: str, access: Role | Rule) -> None:  # fmt: skip
    resource = next(r for m, t, r in served(app) if (m, t) == (method, template))
    assert table.access(method, template, resource) is access


def test_no_responder_needs_any_token_and_an_unlisted_responder_admin(table: RouteTable) -> None:
    class Resource:
        def on_get(self) -> None: ...

    assert table.access("PUT", "/api/v1/push", Resource()) is Role.READ_ONLY  # 405
    assert table.access("GET", "/api/v1/new-route", Resource()) is Role.ADMIN  # fail closed


def test_only_the_peer_route_takes_the_peer_secret(table: RouteTable) -> None:
    peer = {row.path for row in table.rows
            if Rule.PEER in {m.access for m in row.methods.values()}}  # fmt: skip
    assert peer == {"/internal/api/notify"}
    assert all(t.startswith("/internal/") for t in peer)
