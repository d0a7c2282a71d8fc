"""The server's spans (imported only when telemetry is on, config.py): one SERVER span per
request, named and described by the messaging semantic conventions where the route is a
messaging operation (operations.py), the child of the request's incoming W3C context and
linked to the producer contexts of the messages it pushes or delivers (answers.py reads
them from the answer); statements.py makes a CLIENT child per database call made while
it is current.

The span is the request greenlet's current context from `process_request` to
`process_response` (greenlets each have their own contextvars), so a database call made
on the request's behalf finds it; calls of background greenlets (poll workers, timers,
retention) find no span and make none.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import falcon
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from queen_threads.telemetry.annotate import SPAN
from queen_threads.telemetry.answers import delivered, settled
from queen_threads.telemetry.meters import Meters
from queen_threads.telemetry.operations import Operation, operation

SYSTEM = "queen"
_W3C = TraceContextTextMapPropagator()


class _Headers(Getter[falcon.Request]):
    def get(self, carrier: falcon.Request, key: str) -> list[str] | None:
        value = carrier.get_header(key)
        return None if value is None else [value]

    def keys(self, carrier: falcon.Request) -> list[str]:
        return [key.lower() for key in carrier.headers]


_HEADERS = _Headers()


def link_of(carrier: Any) -> Link | None:
    """A link to the span a stored traceContext names (None when it names none)."""
    if not isinstance(carrier, dict):
        return None
    found = trace.get_current_span(_W3C.extract(carrier)).get_span_context()
    return Link(found) if found.is_valid else None


class RequestSpan:
    """One request's span, kept on `req.context` (annotate.py reaches it there)."""

    __slots__ = ("destination", "group", "incoming", "messages", "op", "span", "started", "token")

    def __init__(self, span: trace.Span, token: object, incoming: str | None) -> None:
        self.span = span
        self.token = token
        self.incoming = incoming  # the request's own traceparent: its parent, not a link
        self.started = time.perf_counter()
        self.op: Operation | None = None
        self.destination: str | None = None
        self.group: str | None = None
        self.messages = 0  # pushed or delivered

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        self.span.add_event(name, {k: v for k, v in attributes.items() if v is not None})

    def sent(self, items: Sequence[dict[str, Any]]) -> None:
        self.count(len(items))
        queues = {item.get("queue") for item in items}
        if len(queues) == 1:
            self.destination = str(queues.pop())
        if self.span.is_recording():
            self.link([item.get("traceContext") for item in items])

    def count(self, n: int) -> None:
        self.messages = n
        self.span.set_attribute("messaging.batch.message_count", n)

    def link(self, carriers: Sequence[Any]) -> None:
        seen = {self.incoming}
        for carrier in carriers:
            if not isinstance(carrier, dict) or carrier.get("traceparent") in seen:
                continue
            seen.add(carrier.get("traceparent"))
            found = link_of(carrier)
            if found is not None:
                self.span.add_link(found.context)


class RequestSpans:
    """The falcon middleware: first in the chain, so a request's span covers
    authentication and every other middleware."""

    def __init__(self, tracer: trace.Tracer, meters: Meters | None = None) -> None:
        self.tracer = tracer
        self.meters = meters

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        parent = propagate.extract(req, getter=_HEADERS)
        span = self.tracer.start_span(
            req.method,
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": req.method, "url.path": req.path},
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        setattr(req.context, SPAN, RequestSpan(span, token, req.get_header("traceparent")))

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict[str, Any]
    ) -> None:
        state: RequestSpan | None = getattr(req.context, SPAN, None)
        if state is None:
            return
        template = req.uri_template
        span = state.span
        if template:
            span.set_attribute("http.route", template)
            span.update_name(f"{req.method} {template}")
        op = state.op = operation(req.method, template)
        if op is None:
            return
        state.destination = params.get("queue") or req.get_param("queue")
        state.group = req.get_param("consumerGroup") or req.get_param("group")
        span.set_attribute("messaging.system", SYSTEM)
        span.set_attribute("messaging.operation.name", op.name)
        if op.type is not None:
            span.set_attribute("messaging.operation.type", op.type)
        if params.get("partition"):
            span.set_attribute("messaging.destination.partition.id", params["partition"])

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        state: RequestSpan | None = getattr(req.context, SPAN, None)
        if state is None:
            return
        span = state.span
        status = resp.status_code
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))
            span.set_attribute("error.type", str(status))
        op = state.op
        if op is not None:
            # the answer's messages: for the links (sampled) and the counters (metrics on)
            if (
                op.type == "receive"
                and status == 200
                and (span.is_recording() or self.meters is not None)
            ):
                self._received(state, resp)
            elif op.type == "settle" and status == 200 and span.is_recording():
                self._settled(state, resp)
            self._name(state, op)
        span.end()
        otel_context.detach(state.token)  # type: ignore[arg-type]
        if self.meters is not None:
            elapsed = time.perf_counter() - state.started
            self.meters.request(req, status, elapsed, op, state.destination, state.messages)

    def _received(self, state: RequestSpan, resp: falcon.Response) -> None:
        body = resp.data if resp.data is not None else getattr(resp.stream, "body", None)
        if not body:
            return
        messages, answer = delivered(body)
        state.count(len(messages))
        state.destination = state.destination or answer.get("queue") or answer.get("stream")
        state.group = state.group or answer.get("consumerGroup")
        if state.span.is_recording():
            state.link([m.get("traceContext") for m in messages])

    @staticmethod
    def _settled(state: RequestSpan, resp: falcon.Response) -> None:
        if not resp.data:
            return
        count, where = settled(resp.data)
        if count is not None:
            state.count(count)
        state.destination = state.destination or where

    @staticmethod
    def _name(state: RequestSpan, op: Operation) -> None:
        span = state.span
        if state.destination:
            span.set_attribute("messaging.destination.name", state.destination)
            span.update_name(f"{op.name} {state.destination}")
        else:
            span.update_name(op.name)
        if state.group:
            span.set_attribute("messaging.consumer.group.name", state.group)
