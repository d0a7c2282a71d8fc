"""Build the OpenTelemetry SDK's providers for one worker process (imported only when
config.py says telemetry is on).

gunicorn forks its workers and each builds its Runtime after the fork (preload_app is off,
config/gunicorn.conf.py), so the BatchSpanProcessor's export thread and the metric
reader's are created in the worker that uses them, never inherited from the master.
Under gevent's monkey patching those threads are greenlets and the exporters' HTTP calls
(requests) yield like any other socket: an export never blocks the worker's requests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from queen_threads import __version__
from queen_threads.telemetry.config import DEFAULT_SERVICE_NAME, OtelConfig
from queen_threads.telemetry.meters import Meters
from queen_threads.telemetry.spans import RequestSpans
from queen_threads.telemetry.statements import StatementSpans

SCOPE = "queen_threads"
FLUSH_TIMEOUT_MS = 5000  # what a stopping worker gives its last export


def resource() -> Resource:
    """OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the SDK reads them), else
    service.name queen-threads; the version and the worker's pid beside."""
    found = Resource.create({"service.version": __version__, "process.pid": os.getpid()})
    if not os.environ.get("OTEL_SERVICE_NAME") and str(
        found.attributes.get(SERVICE_NAME, "")
    ).startswith("unknown_service"):
        found = found.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return found


@dataclass
class Telemetry:
    """What the runtime wires: the request middleware, the database call spans, and the
    providers to flush when the worker stops."""

    middleware: RequestSpans
    statements: StatementSpans | None
    tracer_provider: TracerProvider | None
    meter_provider: MeterProvider | None

    def shutdown(self) -> None:
        if self.tracer_provider is not None:
            self.tracer_provider.force_flush(FLUSH_TIMEOUT_MS)
            self.tracer_provider.shutdown()
        if self.meter_provider is not None:
            self.meter_provider.shutdown(FLUSH_TIMEOUT_MS)


def start(config: OtelConfig, database: str | None) -> Telemetry:
    """The providers `config` asks for, exporting over OTLP/HTTP (the exporters read
    OTEL_EXPORTER_OTLP_* themselves; the sampler is OTEL_TRACES_SAMPLER's)."""
    found = resource()
    tracer_provider = meter_provider = None
    meters = None
    if config.traces:
        tracer_provider = TracerProvider(resource=found)
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        tracer: trace.Tracer = tracer_provider.get_tracer(SCOPE, __version__)
    else:
        tracer = trace.NoOpTracer()
    if config.metrics:
        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        meter_provider = MeterProvider(resource=found, metric_readers=[reader])
        meters = Meters(meter_provider.get_meter(SCOPE, __version__))
    statements = StatementSpans(tracer, database) if config.traces else None
    return Telemetry(RequestSpans(tracer, meters), statements, tracer_provider, meter_provider)
