"""Metrics: Prometheus (prometheus-client) for the whole server, plus this process's live
numbers for the JSON `/metrics`.

- definitions.py: the metric objects of a worker process and multiprocess mode;
- counters.py: the in-process totals, rates and latencies of `GET /metrics`;
- metered.py: the measuring points of the shared plumbing, observers handed to what they
  observe (the capabilities' own are in their packages' metrics.py);
- sampler.py: the once-a-second copy of process state into per-process gauges;
- minutes.py, collector.py: the analytics counts per queue and minute and this process's
  figures, flushed into the per-minute tables (docs/api-admin.md, "Analytics");
- exposition.py: `GET /metrics/prometheus` and its scrape-time collectors.

Nothing here imports the runtime or a capability: runtime.py hands each observer to what
it observes, and the sampler and the collectors what they read.
"""

from queen_threads.metrics.collector import AnalyticsCollector, ProcessIdentity, ProcessReader
from queen_threads.metrics.counters import EventRate, ProcessCounters, RequestStats
from queen_threads.metrics.definitions import MULTIPROC_ENV, PromMetrics, multiprocess_mode, prom
from queen_threads.metrics.exposition import Exposition, Instruments
from queen_threads.metrics.metered import (
    AuthMetrics,
    RequestMetrics,
    ServiceMetrics,
    StatementMetrics,
)
from queen_threads.metrics.sampler import Sampler

__all__ = [
    "MULTIPROC_ENV",
    "AnalyticsCollector",
    "AuthMetrics",
    "EventRate",
    "Exposition",
    "Instruments",
    "ProcessCounters",
    "ProcessIdentity",
    "ProcessReader",
    "PromMetrics",
    "RequestMetrics",
    "RequestStats",
    "Sampler",
    "ServiceMetrics",
    "StatementMetrics",
    "multiprocess_mode",
    "prom",
]
