"""An OTLP/HTTP receiver in the test process: what a server exports over
`OTEL_EXPORTER_OTLP_ENDPOINT`, decoded from the protobuf ExportTraceServiceRequest
(opentelemetry-proto) into plain spans the tests can wait for."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    links: list[tuple[str, str]]  # (trace id, span id)
    events: list[tuple[str, int, dict[str, Any]]]  # (name, time, attributes)
    resource: dict[str, Any]
    status_code: int


@dataclass
class Receiver:
    """Collects every span and metric batch posted to it; `wait_for` blocks until some
    span matches (the export is asynchronous), with a deadline."""

    url: str = ""
    spans: list[Span] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    decode: bool = True  # False: only count the bytes (a benchmark's sink)
    received_bytes: int = 0

    def add_traces(self, body: bytes) -> None:
        self.received_bytes += len(body)
        if not self.decode:
            return
        request = ExportTraceServiceRequest.FromString(body)
        found = []
        for rs in request.resource_spans:
            resource = _attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    found.append(Span(
                        name=s.name, trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(), kind=s.kind,
                        start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano,
                        attributes=_attributes(s.attributes),
                        links=[(lk.trace_id.hex(), lk.span_id.hex()) for lk in s.links],
                        events=[(e.name, e.time_unix_nano, _attributes(e.attributes))
                                for e in s.events],
                        resource=resource, status_code=s.status.code,
                    ))  # fmt: skip
        with self.changed:
            self.spans.extend(found)
            self.changed.notify_all()

    def add_metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        with self.changed:
            self.metrics.append(MessageToDict(request))
            self.changed.notify_all()

    def wait_for(self, match: Callable[[Span], bool], timeout: float = 15) -> Span:
        with self.changed:
            found: list[Span] = []

            def seen() -> bool:
                found[:] = [s for s in self.spans if match(s)]
                return bool(found)

            if not self.changed.wait_for(seen, timeout):
                names = sorted({s.name for s in self.spans})
                raise AssertionError(f"no such span within {timeout}s; spans seen: {names}")
            return found[0]

    def wait_metrics(self, match: Callable[[dict[str, Any]], bool], timeout: float = 15) -> None:
        with self.changed:
            ok = self.changed.wait_for(lambda: any(match(m) for m in self.metrics), timeout)
        assert ok, f"no such metrics within {timeout}s"


@contextmanager
def otlp_receiver(port: int = 0, decode: bool = True) -> Iterator[Receiver]:
    receiver = Receiver(decode=decode)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces" or not receiver.decode:
                receiver.add_traces(body)
                answer = ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics":
                receiver.add_metrics(body)
                answer = ExportMetricsServiceResponse().SerializeToString()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def main() -> None:
    """`python -m tests.support.otlp PORT`: a sink for a benchmark of the server with its
    spans on (docs/benchmarks.md, OpenTelemetry): answers every export at once without
    decoding it (as a collector elsewhere would cost this machine nothing); prints the
    bytes it took at exit."""
    import signal
    import sys

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 4318
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with otlp_receiver(port, decode=False) as receiver:
        print(f"OTLP sink on {receiver.url}", flush=True)
        with suppress(KeyboardInterrupt):
            done.wait()
        print(f"{receiver.received_bytes} bytes of OTLP received", flush=True)


if __name__ == "__main__":
    main()
