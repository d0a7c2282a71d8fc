"""The one place where exceptions become HTTP errors: every body is {"error": "..."} (a
CodedValidationError adds its `code`, `reason` and `detail`)."""

from __future__ import annotations

import logging
from typing import Any

import falcon
import orjson

from queen_threads.errors import (
    AuthenticationFailed,
    CodedValidationError,
    Conflict,
    DatabaseError,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    QueenError,
    Unavailable,
    ValidationError,
)

log = logging.getLogger("queen_threads.http")

_STATUS: list[tuple[type[QueenError], int]] = [
    (ValidationError, 400),
    (AuthenticationFailed, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (PayloadTooLarge, 413),
    (Unavailable, 503),
    (DatabaseError, 500),
]


def error_body(message: str, extra: dict[str, str] | None = None) -> bytes:
    return orjson.dumps({"error": message, **(extra or {})})


def _respond(
    resp: falcon.Response, status: int, message: str, extra: dict[str, str] | None = None
) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = error_body(message, extra)


def handle_queen_error(
    req: falcon.Request, resp: falcon.Response, ex: QueenError, params: dict[str, Any]
) -> None:
    status = next((code for cls, code in _STATUS if isinstance(ex, cls)), 500)
    if isinstance(ex, Unavailable):
        resp.set_header("Retry-After", str(ex.retry_after))
    elif isinstance(ex, AuthenticationFailed):
        resp.set_header("WWW-Authenticate", "Bearer")
    if status >= 500:
        log.warning("%s %s -> %d: %s", req.method, req.path, status, ex)
    extra = None
    if isinstance(ex, CodedValidationError):
        extra = {"code": ex.code, "reason": ex.reason, "detail": ex.detail}
    _respond(resp, status, str(ex) or type(ex).__name__, extra)


def handle_http_error(
    req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError, params: dict[str, Any]
) -> None:
    if isinstance(ex, falcon.HTTPRouteNotFound | falcon.HTTPNotFound) and not ex.description:
        message = f"Not found: {req.method} {req.path}"
    elif isinstance(ex, falcon.HTTPMethodNotAllowed):
        message = f"Method {req.method} not allowed on {req.path}"
    else:
        message = ex.description or ex.title or "error"
    if ex.headers:
        resp.set_headers(ex.headers)
    _respond(resp, ex.status_code, message)


def handle_unexpected(
    req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict[str, Any]
) -> None:
    log.exception("unhandled error on %s %s", req.method, req.path)
    _respond(resp, 500, "Internal server error")


def install(app: falcon.App) -> None:
    """Register the handlers; falcon picks the most specific class first."""
    app.add_error_handler(Exception, handle_unexpected)
    app.add_error_handler(falcon.HTTPError, handle_http_error)
    app.add_error_handler(QueenError, handle_queen_error)
