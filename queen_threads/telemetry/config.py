"""Whether the server exports its own spans and metrics: the standard OpenTelemetry
environment variables decide (https://opentelemetry.io/docs/specs/otel/configuration/
sdk-environment-variables/), read here without importing OpenTelemetry.

- Spans: on when an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
  `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless `OTEL_SDK_DISABLED=true` or
  `OTEL_TRACES_EXPORTER=none`. Everything else (`OTEL_SERVICE_NAME`,
  `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER[_ARG]`, `OTEL_BSP_*`,
  `OTEL_EXPORTER_OTLP_*` headers, timeouts, compression) the SDK reads itself.
- Metrics: opt-in, on only when `OTEL_METRICS_EXPORTER=otlp` is set explicitly (the SDK's
  own default would be on) and an endpoint is (`OTEL_EXPORTER_OTLP_ENDPOINT` or
  `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`): the Prometheus endpoint already serves the
  server's metrics, so a second export is asked for, never assumed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

DEFAULT_SERVICE_NAME = "queen-threads"


@dataclass(frozen=True)
class OtelConfig:
    traces: bool
    metrics: bool

    @property
    def enabled(self) -> bool:
        return self.traces or self.metrics


def _set(env: Mapping[str, str], name: str) -> bool:
    return bool(env.get(name, "").strip())


def from_env(env: Mapping[str, str]) -> OtelConfig:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return OtelConfig(False, False)
    endpoint = _set(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    traces = (endpoint or _set(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) and env.get(
        "OTEL_TRACES_EXPORTER", "otlp"
    ).strip().lower() != "none"
    metrics = (endpoint or _set(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")) and env.get(
        "OTEL_METRICS_EXPORTER", ""
    ).strip().lower() == "otlp"
    return OtelConfig(bool(traces), bool(metrics))


def database_name(dsn: str) -> str | None:
    """The database a libpq URL or keyword string names (the spans' db.namespace)."""
    if "://" in dsn:
        name = urlsplit(dsn).path.lstrip("/")
        return unquote(name) or None
    found = re.search(r"(?:^|\s)dbname\s*=\s*'?([^'\s]+)", dsn)
    return found.group(1) if found else None
