"""create_app(): routes, middleware and error handlers around a Runtime."""

from __future__ import annotations

import falcon

from queen_threads.http import errors
from queen_threads.http.auth import Authentication
from queen_threads.http.ignored import ReportIgnoredParameters
from queen_threads.http.middleware import RequestContext
from queen_threads.resources import (
    admin,
    analytics,
    dashboard,
    kv,
    maintenance,
    status,
    streams,
    timers,
)
from queen_threads.resources.ack import Ack, AckBatch
from queen_threads.resources.health import Health
from queen_threads.resources.lease import LeaseExtend
from queen_threads.resources.metrics import Metrics, PrometheusMetrics
from queen_threads.resources.peers import Notify
from queen_threads.resources.pop import Pop
from queen_threads.resources.push import Push
from queen_threads.resources.queues import Configure
from queen_threads.resources.transaction import Transaction
from queen_threads.runtime import Runtime

API = "/api/v1"


def create_app(runtime: Runtime) -> falcon.App:
    context = RequestContext(runtime.stats, runtime.settings.cors_allowed_origins)
    middleware = (context, Authentication(runtime.auth), ReportIgnoredParameters(runtime.ignored))
    app = falcon.App(middleware=middleware, cors_enable=False)
    app.req_options.auto_parse_qs_csv = False
    app.req_options.keep_blank_qs_values = True
    errors.install(app)
    app.add_route("/health", Health(runtime))
    app.add_route("/metrics", Metrics(runtime))
    app.add_route("/metrics/prometheus", PrometheusMetrics(runtime))
    app.add_route(f"{API}/configure", Configure(runtime))
    app.add_route(f"{API}/push", Push(runtime))
    pop = Pop(runtime)
    app.add_route(f"{API}/pop/queue/{{queue}}/partition/{{partition}}", pop)
    app.add_route(f"{API}/pop/queue/{{queue}}", pop)
    app.add_route(f"{API}/pop", pop)
    app.add_route(f"{API}/ack", Ack(runtime))
    app.add_route(f"{API}/ack/batch", AckBatch(runtime))
    app.add_route(f"{API}/transaction", Transaction(runtime))
    app.add_route(f"{API}/lease/{{leaseId}}/extend", LeaseExtend(runtime))
    app.add_route("/internal/api/notify", Notify(runtime))
    admin.register(app, runtime, API)
    maintenance.register(app, runtime, API)
    status.register(app, runtime, API)
    streams.register(app, runtime, API)
    kv.register(app, runtime, API)
    timers.register(app, runtime, API)
    analytics.register(app, runtime.analytics, runtime.admin, API)
    dashboard.register(app, runtime.settings)
    return app
