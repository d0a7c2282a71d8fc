"""The W3C trace context of an HTTP request, for the routes that store messages."""

from __future__ import annotations

import falcon

from queen_threads.telemetry.context import TraceContext, from_headers
from queen_threads.telemetry.metrics import count_invalid


def request_context(req: falcon.Request) -> TraceContext | None:
    """The request's `traceparent` / `tracestate` headers, checked (an invalid one is
    counted and ignored): None when it carries none, nearly always one header lookup."""
    return from_headers(req.get_header, count_invalid)
