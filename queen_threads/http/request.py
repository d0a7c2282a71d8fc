"""Request parsing helpers: JSON bodies and typed query parameters, failing with 400/413."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import falcon
import orjson

from queen_threads.errors import PayloadTooLarge, ValidationError
from queen_threads.http import ignored

TRUE_VALUES = ("true", "1")


def read_body(req: falcon.Request, max_size: int) -> bytes:
    length = req.content_length
    if length is not None and length > max_size:
        raise PayloadTooLarge(f"Request body too large: {length} bytes (limit {max_size})")
    data = req.bounded_stream.read(max_size + 1)
    if len(data) > max_size:
        raise PayloadTooLarge(f"Request body too large (limit {max_size} bytes)")
    return bytes(data)


# The 2.6.0 client's opt-in binary push and transaction bodies (its `binary_push` option).
# The server answers them 400, as the client documents for a broker without them; JSON, the
# client's default, carries the same (docs/benchmarks.md measures what binary would save).
BINARY_BODY = "application/x-queen-push"


def json_body(req: falcon.Request, max_size: int, allow_empty: bool = False) -> Any:
    """The parsed JSON body. An empty body is a 400 unless `allow_empty` (then None)."""
    if (req.content_type or "").split(";")[0].strip().lower() == BINARY_BODY:
        raise ValidationError(
            f"Binary bodies ({BINARY_BODY}) are not supported by this server: send JSON "
            "(the official client's default; turn its binary_push option off)"
        )
    data = read_body(req, max_size)
    if not data.strip():
        if allow_empty:
            return None
        raise ValidationError("Empty request body")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValidationError(f"Invalid JSON: {exc}") from None


def json_object(
    req: falcon.Request,
    max_size: int,
    allow_empty: bool = False,
    known: Collection[str] | None = None,
    not_object: Callable[[], ValidationError] | None = None,
) -> dict[str, Any]:
    """The request's JSON object. With `known` (the top-level fields the route reads), any
    other field is ignored and reported (`http/ignored.py`). A body that is not an object
    is a 400: `not_object()` when the route words its own, else a plain one."""
    body = json_body(req, max_size, allow_empty)
    if body is None:
        return {}
    if not isinstance(body, dict):
        if not_object is not None:
            raise not_object()
        raise ValidationError("Request body must be a JSON object")
    if known is not None:
        ignored.note(req, "body", sorted(key for key in body if key not in known))
    return body


def int_param(
    req: falcon.Request, name: str, default: int, minimum: int, maximum: int | None = None
) -> int:
    value = optional_int_param(req, name, minimum, maximum)
    return default if value is None else value


def optional_int_param(
    req: falcon.Request, name: str, minimum: int, maximum: int | None = None
) -> int | None:
    """The integer parameter `name`, None when absent; a 400 outside [minimum, maximum]."""
    raw = req.get_param(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ValidationError(f"{name} must be {bound}, got {value}")
    return value


def bool_param(req: falcon.Request, name: str, default: bool = False) -> bool:
    raw = req.get_param(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() in TRUE_VALUES


def str_param(req: falcon.Request, name: str) -> str | None:
    raw = req.get_param(name)
    return raw if raw not in (None, "") else None


def media(resp: falcon.Response, body: Any, status: int = 200) -> None:
    """Serialise with orjson (fast, exact round-trip of any JSON value)."""
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = orjson.dumps(body)
