"""What the trace-context part counts in the Prometheus exposition (always on)."""

from __future__ import annotations

from queen_threads.metrics.definitions import prom


def count_invalid(source: str) -> None:
    """An ignored traceparent (`source`: header or item): queen_trace_context_invalid_total."""
    prom().trace_context_invalid.labels(source).inc()
