"""Parameters a route does not know: ignored, and made visible.

The official clients evolve on their own schedule and rely on a broker that ignores the
query parameters and body fields it does not know (the 2.6.0 client's `autopilot`, sent to
any broker, is the example). So a name a route does not take changes nothing, and it is
reported three ways: the answer's `Queen-Ignored-Parameters` header names it (`query:` or
`body:` before each name, percent-encoded), `GET /metrics` counts it per route under
`ignoredParameters` (Prometheus: `queen_ignored_parameters_total`), and the first time a
process meets a (route, name) pair it logs one line. A *known* parameter with a bad value
is still a 400.

A route's known query parameters are in its row (`http/routes.py`); a resource that
knows its body's fields passes them to `http/request.json_object(known=...)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import falcon

from queen_threads.http.routes import RouteTable
from queen_threads.metrics.ignored import IgnoredParameters

HEADER = "Queen-Ignored-Parameters"


def note(req: falcon.Request, kind: str, names: Iterable[str]) -> None:
    """Record that this request's `names` (of `kind`: query or body) were ignored."""
    found = [(kind, name) for name in names]
    if found:
        req.context.ignored_parameters = [*getattr(req.context, "ignored_parameters", ()), *found]


class ReportIgnoredParameters:
    """Middleware: finds the query parameters the route does not take, and after the
    responder names every ignored parameter (query or body) in the header and counts it."""

    def __init__(self, ignored: IgnoredParameters, routes: RouteTable) -> None:
        self.ignored = ignored
        self.routes = routes

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict[str, Any]
    ) -> None:
        if resource is None or not req.params:
            return
        known = self.routes.params(req.method, req.uri_template or "", resource)
        if known is not None:
            note(req, "query", sorted(name for name in req.params if name not in known))

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        found: list[tuple[str, str]] = getattr(req.context, "ignored_parameters", [])
        if not found:
            return
        route = f"{req.method} {req.uri_template or req.path}"
        for kind, name in found:
            self.ignored.record(route, kind, name)
        # Percent-encoded: a name may hold any character, a header value may not.
        resp.set_header(HEADER, ", ".join(f"{kind}:{quote(name, safe='')}" for kind, name in found))
