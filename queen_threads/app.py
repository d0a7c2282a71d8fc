"""create_app(): routes, middleware and error handlers around a Runtime.

`route_table` is the one place the app's routes come together: each capability hands its
rows (http/routes.py), and routing, the access check and the query-parameter rule are
all built from them."""

from __future__ import annotations

from typing import Any

import falcon

from queen_threads.admin import routes as admin
from queen_threads.admin.routes import analytics, status
from queen_threads.dlq import routes as dlq
from queen_threads.ephemeral import routes as ephemeral
from queen_threads.http import errors
from queen_threads.http.auth import Authentication
from queen_threads.http.ignored import ReportIgnoredParameters
from queen_threads.http.long_poll import Timeouts
from queen_threads.http.middleware import RequestContext
from queen_threads.http.routes import RouteTable
from queen_threads.kv import routes as kv
from queen_threads.operations import routes as operations
from queen_threads.operations.routes import dashboard, maintenance
from queen_threads.operations.routes.health import Health
from queen_threads.operations.routes.metrics import (
    Metrics,
    PrometheusMetrics,
    Section,
    buffer_section,
    ephemeral_section,
    kv_section,
)
from queen_threads.queue import routes as queue
from queen_threads.queue.pop_body import PopDefaults
from queen_threads.reads import routes as reads
from queen_threads.runtime import Runtime
from queen_threads.streams import routes as streams
from queen_threads.streams_sdk import routes as streams_sdk
from queen_threads.timers import routes as timers
from queen_threads.transaction import routes as transaction


def route_table(runtime: Runtime) -> RouteTable:
    """Every route of the app, each declared once; each capability is handed what it uses."""
    rt = runtime
    settings = rt.settings
    body_limit = settings.max_body_size
    timeouts = Timeouts(settings.default_timeout_ms, settings.max_timeout_ms)
    defaults = PopDefaults(
        settings.default_batch_size, settings.default_subscription_mode, timeouts
    )
    exposition = rt.instruments.exposition
    assert exposition is not None
    health = Health(
        rt.db,
        settings.port,
        rt.worker_id,
        rt.version,
        rt.schema_ready,
        rt.availability.schema_ready_now,
        rt.maintenance,
    )
    metrics = Metrics(rt.started_at, metrics_sections(rt))
    return RouteTable([
        *operations.routes(health, metrics, PrometheusMetrics(exposition), rt.peers),
        *queue.routes(
            rt.queues, rt.store, rt.polling, rt.maintenance, rt.availability.require_database,
            defaults, body_limit,
        ),
        *transaction.routes(rt.queues, rt.timers.scheduled, body_limit),
        *dlq.routes(rt.dlq, body_limit),
        *admin.routes(rt.admin, rt.store, rt.queues, body_limit),
        *maintenance.routes(rt.maintenance, rt.buffer, body_limit),
        *status.routes(rt.admin),
        *streams.routes(
            rt.streams, rt.stream_store, rt.stream_polling, body_limit, timeouts,
            rt.maintenance, rt.availability.require_database,
        ),
        *streams_sdk.routes(rt.streams_sdk, body_limit),
        *kv.routes(rt.kv, body_limit),
        *timers.routes(rt.timers, body_limit),
        *reads.routes(rt.reads, body_limit),
        *ephemeral.routes(rt.ephemeral, body_limit, timeouts),
        *analytics.routes(rt.analytics, rt.admin),
        *dashboard.routes(settings),
    ])  # fmt: skip


def metrics_sections(rt: Runtime) -> dict[str, Section]:
    """The parts of GET /metrics, in the answer's order."""
    counters = rt.instruments.counters
    return {
        "worker": lambda: {"pid": rt.worker_id},
        "requests": rt.stats.snapshot,
        "ignoredParameters": rt.ignored.stats,
        "messages": counters.messages_snapshot,
        "database": lambda: {**rt.db.pool.stats(), "queries": counters.db_snapshot()},
        "longPolling": rt.polling.stats,
        "streamPolling": rt.stream_polling.stats,
        "timers": rt.timers.stats,
        "ephemeral": ephemeral_section(rt.db.pool, rt.ephemeral),
        "wakeupListener": rt.listener.stats,
        "peers": rt.peers.stats,
        "auth": rt.auth.stats,
        "buffer": buffer_section(rt.buffer),
        "background": lambda: {
            **rt.operations.stats(),
            "metrics": rt.metrics_service.stats(),
            "kvSweep": rt.kv_sweeper.stats(),
        },
        "kv": kv_section(rt.db.pool, rt.kv),
        "analytics": rt.collector.stats,
    }


def create_app(runtime: Runtime, routes: RouteTable | None = None) -> falcon.App:
    table = routes or route_table(runtime)
    context = RequestContext(runtime.requests, runtime.settings.cors_allowed_origins)
    # The request's span (telemetry on) first: it covers everything the others do.
    middleware: list[Any] = [
        context,
        Authentication(runtime.auth, table),
        ReportIgnoredParameters(runtime.ignored, table),
    ]
    if runtime.telemetry is not None:  # the request's span first: it covers the others
        middleware.insert(0, runtime.telemetry.middleware)
    app = falcon.App(middleware=middleware, cors_enable=False)
    app.req_options.auto_parse_qs_csv = False
    app.req_options.keep_blank_qs_values = True
    errors.install(app)
    table.install(app)
    return app
