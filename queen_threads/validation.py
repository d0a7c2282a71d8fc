"""The value checks every capability's body rules share: names, optional strings and
booleans, uuids, timestamps, arrays. What a route's body may carry is in its capability's
`body.py` (the queue core's: queue/body.py).

Each function returns the value normalised, or raises ValidationError with a message the
client can act on (answered 400, nothing changed).
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from functools import lru_cache
from typing import Any

from queen_threads.errors import ValidationError

QUEUE_MODE = "__QUEUE_MODE__"
DEFAULT_PARTITION = "Default"
NAME_RE = re.compile(r"^[A-Za-z0-9._:@=\-]{1,255}$")
NAME_RULE = "1-255 characters: letters, digits and . _ - : @ ="


def name(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string")
    if not NAME_RE.match(value):
        raise ValidationError(f"Invalid {what.lower()} name {value!r}: use {NAME_RULE}")
    return value


def optional_name(value: Any, what: str, default: str | None = None) -> str | None:
    return default if value is None else name(value, what)


def optional_str(value: Any, what: str, max_len: int = 10_000) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string")
    if len(value) > max_len:
        raise ValidationError(f"{what} is too long (max {max_len} characters)")
    return value


def optional_bool(value: Any, what: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise ValidationError(f"{what} must be a boolean")
    return value


def uuid_str(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string")
    try:
        return _canonical_uuid(value)
    except ValueError:
        raise ValidationError(f"{what} must be a UUID, got {value!r}") from None


@lru_cache(maxsize=4096)
def _canonical_uuid(value: str) -> str:
    """Remembered: the items of an ack name a few partitions, each up to a batch's times
    (parsing cost 100 acks a millisecond of a worker's time)."""
    return str(uuid.UUID(value))


def timestamp(value: Any, what: str) -> str:
    """An ISO-8601 timestamp, returned unchanged for PostgreSQL (which parses it again)."""
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{what} must be an ISO-8601 timestamp")
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(f"{what} must be an ISO-8601 timestamp, got {value!r}") from None
    return value


def items_list(body: dict[str, Any], key: str, message: str) -> list[Any]:
    value = body.get(key)
    if not isinstance(value, list):
        raise ValidationError(message)
    return value
