"""The server's metrics over OTLP (opt-in, config.py): per request what the Prometheus
endpoint also counts, under the OpenTelemetry semantic conventions' names, so a backend
that takes OTLP needs no scrape. Imported only when metrics are on."""

from __future__ import annotations

from typing import Any

import falcon
from opentelemetry.metrics import Meter

from queen_threads.telemetry.operations import Operation

SYSTEM = "queen"


class Meters:
    def __init__(self, meter: Meter) -> None:
        self.duration = meter.create_histogram(
            "http.server.request.duration", unit="s", description="Duration of HTTP requests."
        )
        self.operation = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of messaging operations (push, pop, ack, ...).",
        )
        self.sent = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}", description="Messages pushed."
        )
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Messages delivered by pops, stream polls and offset reads.",
        )

    def request(
        self,
        req: falcon.Request,
        status: int,
        elapsed: float,
        op: Operation | None,
        destination: str | None,
        messages: int,
    ) -> None:
        """One request: its duration, and for a messaging operation the messages it
        pushed or delivered."""
        http: dict[str, Any] = {"http.request.method": req.method,
                                "http.response.status_code": status}  # fmt: skip
        if req.uri_template:
            http["http.route"] = req.uri_template
        self.duration.record(elapsed, http)
        if op is None:
            return
        attributes: dict[str, Any] = {"messaging.system": SYSTEM,
                                      "messaging.operation.name": op.name}  # fmt: skip
        if op.type is not None:
            attributes["messaging.operation.type"] = op.type
        if destination:
            attributes["messaging.destination.name"] = destination
        if status >= 400:
            attributes["error.type"] = str(status)
        self.operation.record(elapsed, attributes)
        if status >= 300 or not messages:
            return
        if op.type == "send":
            self.sent.add(messages, attributes)
        elif op.type == "receive":
            self.consumed.add(messages, attributes)
