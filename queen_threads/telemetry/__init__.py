"""Telemetry: a message's W3C trace context through the queue (context.py, incoming.py),
and the server's own OpenTelemetry spans and metrics, exported over OTLP only when the
standard OTEL_* variables ask for it (config.py; docs/observability.md).

Nothing here imports OpenTelemetry unless it is switched on: `config.py` reads the
environment and `setup.py` (which imports the SDK) is imported only then.
"""
