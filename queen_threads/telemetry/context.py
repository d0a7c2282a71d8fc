"""A message's W3C trace context: what a push may carry and what is stored with it.

A producer instrumented with OpenTelemetry sends its context as the `traceparent` and
`tracestate` headers of its push (https://www.w3.org/TR/trace-context/); a batch whose items
come from different traces can carry them per item instead (the item's own fields win).
What is kept is `{"traceparent": ..., "tracestate": ...}` (tracestate only when given),
stored with the message (schema/migrations/0021) and returned by every pop as its
`traceContext`: a carrier `opentelemetry.propagate.extract()` reads as it is.

The W3C rule: a traceparent that does not parse is ignored, never an error; so is a
tracestate without a valid traceparent, and a tracestate that is not one (the traceparent
is then kept alone). Each ignored traceparent is counted (`on_invalid`, the
`queen_trace_context_invalid_total` counter). Pure Python: nothing of OpenTelemetry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

TraceContext = dict[str, str]
OnInvalid = Callable[[str], None]  # told "header" or "item" for each ignored traceparent

# version "00": exactly four fields. A later version may append fields after a "-"; its
# first four fields are read as version 00's (the specification's forward compatibility).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
MAX_TRACESTATE = 512  # the length every vendor must accept (W3C: may truncate beyond)
_TRACESTATE = re.compile(r"[\x20-\x7e]*")


def valid_traceparent(value: Any) -> bool:
    """Whether `value` is a traceparent the W3C specification says to use."""
    if not isinstance(value, str) or len(value) < 55:
        return False
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return False
    version, trace_id, span_id, _flags, rest = match.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return False
    return version != "00" or rest is None


def _tracestate(value: Any) -> str | None:
    if not isinstance(value, str) or not value or len(value) > MAX_TRACESTATE:
        return None
    return value if _TRACESTATE.fullmatch(value) else None


def trace_context(
    traceparent: Any, tracestate: Any, source: str, on_invalid: OnInvalid | None
) -> TraceContext | None:
    """The context to store, or None (none given, or an invalid one: counted)."""
    if traceparent is None:
        return None
    if not valid_traceparent(traceparent):
        if on_invalid is not None:
            on_invalid(source)
        return None
    state = _tracestate(tracestate)
    if state is None:
        return {"traceparent": traceparent}
    return {"traceparent": traceparent, "tracestate": state}


def from_headers(
    get_header: Callable[[str], str | None], on_invalid: OnInvalid | None = None
) -> TraceContext | None:
    """A request's context (`get_header`: falcon's `req.get_header`)."""
    parent = get_header("traceparent")
    if parent is None:
        return None
    return trace_context(parent.strip(), get_header("tracestate"), "header", on_invalid)


def for_item(
    item: dict[str, Any], request: TraceContext | None, on_invalid: OnInvalid | None = None
) -> TraceContext | None:
    """An item's context: its own `traceparent` field when it has one (an invalid one
    leaves it without any), else the request's."""
    if "traceparent" not in item:
        return request
    return trace_context(item["traceparent"], item.get("tracestate"), "item", on_invalid)
