"""The database calls' spans (imported only when telemetry is on): a CLIENT child of the
current span per call, and nothing when no recording span is current (background work)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace import SpanKind


class StatementSpans:
    """A CLIENT span per database call made while a recording span is current (the
    Database calls `statement(name)` around each: its `spans`, db/statements.py)."""

    def __init__(self, tracer: trace.Tracer, database: str | None) -> None:
        self.tracer = tracer
        self.attributes = {"db.system.name": "postgresql"}
        if database:
            self.attributes["db.namespace"] = database

    @contextmanager
    def statement(self, name: str) -> Iterator[None]:
        if not trace.get_current_span().is_recording():
            yield
            return
        with self.tracer.start_as_current_span(
            name,
            kind=SpanKind.CLIENT,
            attributes={**self.attributes, "db.operation.name": name},
        ):
            yield
