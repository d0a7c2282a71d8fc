"""The real app's route table and router, around a runtime that is never started."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import falcon
import falcon.routing

from queen_threads.app import create_app, route_table
from queen_threads.http.routes import RouteTable
from queen_threads.runtime import Runtime
from queen_threads.settings import load_settings


def unstarted_runtime(folder: Path, **env: str) -> Runtime:
    """A Runtime that touches no database (nothing is started)."""
    settings = load_settings({"FILE_BUFFER_DIR": str(folder / "buffers"), **env}, dotenv_path=None)
    return Runtime(settings, "postgresql://127.0.0.1:1/unused")


def table_and_app(folder: Path) -> tuple[RouteTable, falcon.App]:
    runtime = unstarted_runtime(folder)
    table = route_table(runtime)
    return table, create_app(runtime, table)


def served(app: falcon.App) -> Iterator[tuple[str, str, Any]]:
    """(method, uri template, resource) of every responder the router holds."""

    def walk(nodes: list[Any]) -> Iterator[tuple[str, str, Any]]:
        for node in nodes:
            if node.resource is not None:
                for method in falcon.routing.map_http_methods(node.resource):
                    yield method, node.uri_template, node.resource
            yield from walk(node.children)

    yield from walk(app._router._roots)


def rows(table: RouteTable) -> dict[str, dict[str, Any]]:
    """template -> {method: Method}, for assertions."""
    return {path: dict(methods) for path, methods in table.by_path.items()}
