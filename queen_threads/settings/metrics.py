"""Metrics: analytics flushes, their retention, prometheus-client files."""

from __future__ import annotations

from dataclasses import dataclass

from queen_threads.settings.parsers import env, integer, number, text


@dataclass(frozen=True)
class MetricsSettings:
    """The analytics counters and Prometheus."""

    metrics_retention_days: int = env(
        "METRICS_RETENTION_DAYS",
        7,
        integer(0),
        "Keep the analytics minutes and queen.retention_history rows this many days (0: forever).",
    )
    metrics_flush_interval_s: float = env(
        "METRICS_FLUSH_INTERVAL_S",
        60.0,
        number(0.1),
        "Each worker process writes its analytics counts this often, s; the queues' levels "
        "are sampled twice as often.",
    )
    prometheus_multiproc_dir: str = env(
        "PROMETHEUS_MULTIPROC_DIR",
        "",
        text,
        "Folder of prometheus-client's per-process files (unset: a fresh temporary folder).",
    )
