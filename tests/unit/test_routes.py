"""The route table: every route declared once, and routing, the access check and the
query-parameter rule all built from it."""

from __future__ import annotations

from pathlib import Path

import falcon
import falcon.routing
import pytest

from queen_threads.auth import Role
from queen_threads.http.auth import Authentication
from queen_threads.http.ignored import ReportIgnoredParameters
from queen_threads.http.routes import Method, Route, RouteTable, Rule, route
from tests.support.routes import served


def test_every_row_names_its_access_and_parameters(built: tuple[RouteTable, falcon.App]) -> None:
    table, _ = built
    assert len(table.rows) > 60
    for row in table.rows:
        assert row.methods, row.path
        for name, method in row.methods.items():
            assert isinstance(method.access, (Role, Rule)), (row.path, name)
            assert method.access is not Role.NONE, (row.path, name)
            assert isinstance(method.params, frozenset), (row.path, name)
            assert all(isinstance(p, str) and p for p in method.params), (row.path, name)


def test_a_row_declares_exactly_the_methods_its_resource_serves(
    built: tuple[RouteTable, falcon.App],
) -> None:
    table, _ = built
    for row in table.rows:
        responders = set(falcon.routing.map_http_methods(row.resource))
        assert set(row.methods) == responders, row.path


def test_the_router_holds_the_table_and_nothing_else(built: tuple[RouteTable, falcon.App]) -> None:
    table, app = built
    routed = {(m, t): r for m, t, r in served(app)}
    declared = {(m, row.path): row.resource for row in table.rows for m in row.methods}
    assert routed.keys() == declared.keys()
    assert all(routed[key] is declared[key] for key in declared)


def test_the_access_check_and_the_parameter_rule_read_the_table(
    built: tuple[RouteTable, falcon.App],
) -> None:
    table, app = built
    middleware = [m for group in app._middleware for m in group if m is not None]
    owners = {type(getattr(m, "__self__", None)) for m in middleware}
    assert {Authentication, ReportIgnoredParameters} <= owners
    for m in middleware:
        owner = getattr(m, "__self__", None)
        if isinstance(owner, Authentication | ReportIgnoredParameters):
            assert owner.routes is table
    for row in table.rows:
        for name, method in row.methods.items():
            assert table.access(name, row.path, row.resource) is method.access
            assert table.params(name, row.path, row.resource) is method.params


def test_a_route_is_declared_once() -> None:
    class Resource:
        def on_get(self) -> None: ...

    with pytest.raises(ValueError, match="declared twice"):
        RouteTable([route("/a", Resource(), GET=Role.READ_ONLY)] * 2)


def test_a_row_reads_as_written() -> None:
    row = route("/a", None, GET=Role.READ_ONLY, DELETE=(Role.ADMIN, ["x"]))
    assert row == Route(
        "/a",
        None,
        {"GET": Method(Role.READ_ONLY), "DELETE": Method(Role.ADMIN, frozenset({"x"}))},
    )


def test_nothing_else_adds_a_route() -> None:
    """`add_route` is called in one place: RouteTable.install."""
    package = Path(__file__).resolve().parents[2] / "queen_threads"
    callers = [p for p in package.rglob("*.py") if ".add_route(" in p.read_text()]
    assert [p.relative_to(package).as_posix() for p in callers] == ["http/routes.py"]
