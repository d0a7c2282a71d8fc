"""The real route table and app around a runtime that is never started (no database is
touched), shared by the route tests of this folder."""

from __future__ import annotations

import falcon
import pytest

from queen_threads.http.routes import RouteTable
from tests.support.routes import table_and_app


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[RouteTable, falcon.App]:
    """The real table and app around a runtime that is never started."""
    return table_and_app(tmp_path_factory.mktemp("routes"))


@pytest.fixture(scope="module")
def app(built: tuple[RouteTable, falcon.App]) -> falcon.App:
    return built[1]


@pytest.fixture(scope="module")
def table(built: tuple[RouteTable, falcon.App]) -> RouteTable:
    return built[0]
