"""What the routes tell the request's span, without importing OpenTelemetry: each call
looks for the span the telemetry middleware put on `req.context` (spans.py) and does
nothing without one (telemetry off: one attribute lookup)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import falcon

SPAN = "otel_request"  # the attribute of req.context that holds the RequestSpan


class RequestSpan(Protocol):
    """The part of spans.RequestSpan the routes use."""

    def event(self, name: str, attributes: dict[str, Any]) -> None: ...

    def sent(self, items: Sequence[dict[str, Any]]) -> None: ...


def _span(req: falcon.Request) -> RequestSpan | None:
    span: RequestSpan | None = getattr(req.context, SPAN, None)
    return span


def event(req: falcon.Request, name: str, **attributes: Any) -> None:
    """An event on the request's span (a long poll's wait and its wake-up)."""
    span = _span(req)
    if span is not None:
        span.event(name, attributes)


def sent(req: falcon.Request, items: Iterable[dict[str, Any]]) -> None:
    """The messages a request pushes (checked items): their count, their queue, and a link
    to each trace context of theirs that is not the request's own."""
    span = _span(req)
    if span is not None:
        span.sent(list(items))
