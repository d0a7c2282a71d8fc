"""The bodies of the /api/v1/stream/* routes, checked before anything runs.

Each route's fields are listed here (`*_FIELDS`); the resource hands them to `json_object`,
so any other field is ignored and named in the `Queen-Ignored-Parameters` header (a
misspelt `window_duration` shows there instead of passing silently for the 60 s default).
Numbers must be integers in range, names follow the queue name rule. The defaults are the
original server's (docs/streams.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from queen_threads import validation as v
from queen_threads.errors import ValidationError
from queen_threads.http.params import iso_time

WINDOW_TYPES = ("tumbling", "sliding", "count")
DEFINE_FIELDS = (
    "name",
    "namespace",
    "partitioned",
    "window_type",
    "window_duration_ms",
    "window_slide_ms",
    "window_size_count",
    "window_grace_period_ms",
    "window_lease_timeout_ms",
    "source_queue_names",
)
POLL_FIELDS = ("streamName", "consumerGroup", "timeout")
ACK_FIELDS = ("leaseId", "success")
RENEW_FIELDS = ("leaseId", "extend_ms")
SEEK_FIELDS = ("streamName", "consumerGroup", "timestamp")
DEFAULT_DURATION_MS = 60_000
DEFAULT_GRACE_MS = 30_000
DEFAULT_LEASE_MS = 60_000
DEFAULT_EXTEND_MS = 30_000
MAX_MS = 7 * 24 * 3600 * 1000  # a week: longer windows or leases are mistakes
MAX_COUNT = 100_000  # messages in one count window (one response carries them all)
MAX_SOURCES = 100


@dataclass(frozen=True, slots=True)
class StreamPoll:
    """A validated `POST /stream/poll` body."""

    stream: str
    consumer_group: str
    timeout_ms: int


def _int(body: dict[str, Any], key: str, default: int | None, low: int, high: int) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{key} must be an integer from {low} to {high}")
    return value


def _required_int(body: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = _int(body, key, default, low, high)
    assert value is not None
    return value


def define_body(body: dict[str, Any]) -> dict[str, Any]:
    """The stored function's input for `POST /stream/define` (every default filled in)."""
    window_type = body.get("window_type", "tumbling")
    if window_type not in WINDOW_TYPES:
        raise ValidationError(f"window_type must be one of {', '.join(WINDOW_TYPES)}")
    sources = body.get("source_queue_names")
    if not isinstance(sources, list) or not sources or len(sources) > MAX_SOURCES:
        raise ValidationError(
            f"source_queue_names must be a list of 1 to {MAX_SOURCES} queue names"
        )
    partitioned = v.optional_bool(body.get("partitioned"), "partitioned")
    duration = slide = count = None
    if window_type == "count":
        for key in ("window_duration_ms", "window_slide_ms"):
            if body.get(key) is not None:
                raise ValidationError(f"{key} does not apply to count windows")
        count = _int(body, "window_size_count", None, 1, MAX_COUNT)
        if count is None:
            raise ValidationError("window_size_count is required for count windows")
    else:
        if body.get("window_size_count") is not None:
            raise ValidationError("window_size_count applies to count windows only")
        duration = _required_int(body, "window_duration_ms", DEFAULT_DURATION_MS, 1, MAX_MS)
        if window_type == "sliding":
            slide = _int(body, "window_slide_ms", None, 1, duration)
            if slide is None:
                raise ValidationError("window_slide_ms is required for sliding windows")
        else:
            if body.get("window_slide_ms") is not None:
                raise ValidationError("window_slide_ms applies to sliding windows only")
            slide = duration
    return {
        "name": v.name(body.get("name"), "Stream"),
        "namespace": v.optional_name(body.get("namespace"), "Namespace") or "",
        "partitioned": bool(partitioned),
        "window_type": window_type,
        "window_duration_ms": duration,
        "window_slide_ms": slide,
        "window_size_count": count,
        "window_grace_period_ms": _int(body, "window_grace_period_ms", DEFAULT_GRACE_MS, 0, MAX_MS),
        "window_lease_timeout_ms": _int(
            body, "window_lease_timeout_ms", DEFAULT_LEASE_MS, 1000, MAX_MS
        ),
        "source_queue_names": sorted({v.name(q, "Queue") for q in sources}),
    }


def poll_body(body: dict[str, Any], default_timeout_ms: int, max_timeout_ms: int) -> StreamPoll:
    """`POST /stream/poll`: {streamName, consumerGroup, timeout}."""
    return StreamPoll(
        stream=v.name(body.get("streamName"), "Stream"),
        consumer_group=v.name(body.get("consumerGroup"), "Consumer group"),
        timeout_ms=min(
            _required_int(body, "timeout", default_timeout_ms, 0, 2**31 - 1), max_timeout_ms
        ),
    )


def lease_id(body: dict[str, Any]) -> str:
    lease = v.uuid_str(body.get("leaseId"), "leaseId")
    if lease is None:
        raise ValidationError("leaseId is required")
    return lease


def ack_body(body: dict[str, Any]) -> dict[str, Any]:
    """`POST /stream/ack`: {leaseId, success=true}."""
    success = v.optional_bool(body.get("success"), "success")
    return {"leaseId": lease_id(body), "success": True if success is None else success}


def renew_body(body: dict[str, Any]) -> dict[str, Any]:
    """`POST /stream/renew-lease`: {leaseId, extend_ms=30000}."""
    return {
        "leaseId": lease_id(body),
        "extendMs": _int(body, "extend_ms", DEFAULT_EXTEND_MS, 1, MAX_MS),
    }


def seek_body(body: dict[str, Any]) -> dict[str, Any]:
    """`POST /stream/seek`: {streamName, consumerGroup, timestamp}."""
    return {
        "stream": v.name(body.get("streamName"), "Stream"),
        "consumerGroup": v.name(body.get("consumerGroup"), "Consumer group"),
        "timestamp": iso_time(body.get("timestamp"), "timestamp").isoformat(),
    }
