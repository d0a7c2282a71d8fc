"""Cross-cutting request handling: request ids, CORS, preflight, access log, counters.

CORS follows CORS_ALLOWED_ORIGINS: `*` (the default, as the original) allows any origin;
a list answers `Access-Control-Allow-Origin` only to a request whose `Origin` is in it (a
browser then refuses the response to any other page). A preflight (`OPTIONS`) is
answered 204 before authentication: browsers send it without credentials. The methods,
headers and max-age a browser may use are the preflight's answer only (a browser reads
them nowhere else): every other answer carries just the origin rule, three headers fewer
for gunicorn to check and write on every request.

A request without an `X-Request-Id` gets one made of this process's random prefix and a
counter: unique, and no random bytes drawn per request.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from typing import Any, Protocol

import falcon

access_log = logging.getLogger("queen_threads.access")

CORS_HEADERS = {
    "Access-Control-Allow-Methods": "GET, POST, PUT, DELETE, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization",
    "Access-Control-Max-Age": "86400",
}


class RequestObserver(Protocol):
    """Hears every request: when it begins, and its status and duration once answered
    (metrics/counters.py's `RequestStats`; metrics/metered.py's `RequestMetrics`)."""

    def begin(self) -> None: ...

    def record(self, status: int, elapsed_ms: float) -> None: ...


class RequestContext:
    """Gives every request an id (X-Request-Id), CORS headers and one access-log line, and
    tells its observer."""

    def __init__(self, observer: RequestObserver, cors_origins: tuple[str, ...] = ("*",)) -> None:
        self.observer = observer
        self.any_origin = "*" in cors_origins
        self.origins = frozenset(cors_origins)
        self._prefix = secrets.token_hex(6)
        self._ids = itertools.count(1)

    def _cors(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.method == "OPTIONS":
            resp.set_headers(CORS_HEADERS)
        if self.any_origin:
            resp.set_header("Access-Control-Allow-Origin", "*")
        else:
            resp.set_header("Vary", "Origin")
            origin = req.get_header("Origin")
            if origin in self.origins:
                resp.set_header("Access-Control-Allow-Origin", origin)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.started = time.monotonic()
        self.observer.begin()
        incoming = req.get_header("X-Request-Id")
        req.context.request_id = (
            incoming if incoming and len(incoming) <= 128 else f"{self._prefix}{next(self._ids):x}"
        )
        self._cors(req, resp)
        resp.set_header("X-Request-Id", req.context.request_id)
        if req.method == "OPTIONS":
            resp.status = 204
            resp.complete = True

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        started = getattr(req.context, "started", None)
        request_id = getattr(req.context, "request_id", None)
        self.finish(req.method, req.relative_uri, resp.status_code, started, request_id)

    def finish(
        self, method: str, uri: str, status: int, started: float | None, request_id: str | None
    ) -> None:
        """Count the request and write its access line."""
        elapsed_ms = (time.monotonic() - started) * 1000 if started else 0.0
        self.observer.record(status, elapsed_ms)
        access_log.info(
            "%s %s %d %.1fms", method, uri, status, elapsed_ms, extra={"request_id": request_id}
        )
