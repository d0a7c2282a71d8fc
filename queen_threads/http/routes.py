"""Every route the app serves, declared once.

A capability's `routes.py` hands the app its rows; one row is a route template, its
resource, and for each method it serves who may call it and which query parameters it
knows. The app builds three things from the rows and from nothing else:

- routing: `app.add_route(path, resource)` for each row;
- the access check (`http/auth.py`) when JWT_ENABLED is on. The levels follow the original
  server (docs/security.md): admin > read-write > read-only. `/health` and the metrics are
  read-only here and public through the default JWT_SKIP_PATHS, so a deployment can close
  them by leaving them out of that list. `/internal/api/*` takes the peer secret
  (QUEEN_PEER_SECRET) and never a user's token. The dashboard's page paths and files
  (`http/webapp.py`) are public whatever JWT_SKIP_PATHS says: they hold no data, and the
  page asks for a token itself when one of its API calls answers 401;
- the query-parameter rule (`http/ignored.py`): a parameter a route does not know is
  ignored, as the official clients require of a broker, and named in the answer. A row
  lists what the responder reads and every parameter the official client sends to it.

`tests/unit/test_routes.py` walks the table and falcon's router.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import falcon

from queen_threads.auth import Role


class Rule(Enum):
    PEER = "peer"  # the route checks QUEEN_PEER_SECRET itself; a user token never opens it
    PUBLIC = "public"  # the dashboard's files: no token needed, none looked at


Access = Role | Rule

RO, RW, ADMIN = Role.READ_ONLY, Role.READ_WRITE, Role.ADMIN
PEER, PUBLIC = Rule.PEER, Rule.PUBLIC
API = "/api/v1"
NONE: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Method:
    """One method of a route: who may call it, and the query parameters it knows."""

    access: Access
    params: frozenset[str] = NONE


@dataclass(frozen=True)
class Route:
    """One row: a route template, its resource and its methods."""

    path: str
    resource: object
    methods: Mapping[str, Method]


def route(path: str, resource: object, **methods: Access | tuple[Access, Iterable[str]]) -> Route:
    """A row: `route(path, resource, GET=RO, DELETE=(ADMIN, {"deleteMetadata"}))`; a method
    given only its access knows no query parameter."""
    return Route(
        path,
        resource,
        {
            name: Method(spec[0], frozenset(spec[1])) if isinstance(spec, tuple) else Method(spec)
            for name, spec in methods.items()
        },
    )


class RouteTable:
    """The rows of the whole app, by template."""

    def __init__(self, rows: Iterable[Route]) -> None:
        self.rows = tuple(rows)
        self.by_path: dict[str, Mapping[str, Method]] = {}
        for row in self.rows:
            if row.path in self.by_path:
                raise ValueError(f"route declared twice: {row.path}")
            self.by_path[row.path] = row.methods

    def install(self, app: falcon.App) -> None:
        for row in self.rows:
            app.add_route(row.path, row.resource)

    def method(self, method: str, template: str) -> Method | None:
        return self.by_path.get(template, {}).get(method)

    def access(self, method: str, template: str, resource: Any) -> Access:
        """The access `method` on the route `template` needs. A method its resource does not
        serve (405) needs any valid token; a responder missing from the table (which the
        unit test forbids) is admin-only. (A path with no route is answered 404 before
        this.)"""
        row = self.method(method, template)
        if row is not None:
            return row.access
        return Role.ADMIN if _serves(resource, method) else Role.READ_ONLY

    def params(self, method: str, template: str, resource: Any) -> frozenset[str] | None:
        """The query parameters `method` on `template` takes. None for a method its
        resource does not serve (falcon answers 405); a responder missing from the table
        (which the unit test forbids) takes none."""
        row = self.method(method, template)
        if row is not None:
            return row.params
        return NONE if _serves(resource, method) else None


def _serves(resource: Any, method: str) -> bool:
    return hasattr(resource, f"on_{method.lower()}")
