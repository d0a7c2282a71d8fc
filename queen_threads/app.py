"""create_app(): routes, middleware and error handlers around a Runtime.

`route_table` is the one place the app's routes come together: each capability hands its
rows (http/routes.py), and routing, the access check and the query-parameter rule are
all built from them."""

from __future__ import annotations

import falcon

from queen_threads.ephemeral import routes as ephemeral
from queen_threads.http import errors
from queen_threads.http.auth import Authentication
from queen_threads.http.ignored import ReportIgnoredParameters
from queen_threads.http.long_poll import Timeouts
from queen_threads.http.middleware import RequestContext
from queen_threads.http.routes import API, PEER, RO, RW, RouteTable, route
from queen_threads.reads import routes as reads
from queen_threads.resources import (
    admin,
    analytics,
    dashboard,
    kv,
    maintenance,
    pop,
    status,
    streams,
    streams_sdk,
    timers,
)
from queen_threads.resources.ack import Ack, AckBatch
from queen_threads.resources.health import Health
from queen_threads.resources.lease import LeaseExtend
from queen_threads.resources.metrics import Metrics, PrometheusMetrics
from queen_threads.resources.peers import Notify
from queen_threads.resources.push import Push
from queen_threads.resources.queues import Configure
from queen_threads.resources.transaction import Transaction
from queen_threads.runtime import Runtime


def route_table(runtime: Runtime) -> RouteTable:
    """Every route of the app, each declared once."""
    settings = runtime.settings
    body_limit = settings.max_body_size
    timeouts = Timeouts(settings.default_timeout_ms, settings.max_timeout_ms)
    popper = pop.Pop(runtime)
    return RouteTable([
        # operations (public through the default JWT_SKIP_PATHS)
        route("/health", Health(runtime), GET=RO),
        route("/metrics", Metrics(runtime), GET=RO),
        route("/metrics/prometheus", PrometheusMetrics(runtime), GET=RO),
        # producing and consuming
        route(f"{API}/configure", Configure(runtime), POST=RW),
        route(f"{API}/push", Push(runtime), POST=RW),
        route(f"{API}/pop/queue/{{queue}}/partition/{{partition}}", popper, GET=(RW, pop.PARAMS)),
        route(f"{API}/pop/queue/{{queue}}", popper, GET=(RW, pop.PARAMS)),
        route(f"{API}/pop", popper, GET=(RW, pop.PARAMS)),
        route(f"{API}/ack", Ack(runtime), POST=RW),
        route(f"{API}/ack/batch", AckBatch(runtime), POST=RW),
        route(f"{API}/transaction", Transaction(runtime), POST=RW),
        route(f"{API}/lease/{{leaseId}}/extend", LeaseExtend(runtime), POST=RW),
        # between instances
        route("/internal/api/notify", Notify(runtime), POST=PEER),
        *admin.routes(runtime),
        *maintenance.routes(runtime),
        *status.routes(runtime.admin),
        *streams.routes(runtime),
        *streams_sdk.routes(runtime),
        *kv.routes(runtime),
        *timers.routes(runtime),
        *reads.routes(runtime.reads, body_limit),
        *ephemeral.routes(runtime.ephemeral, body_limit, timeouts),
        *analytics.routes(runtime.analytics, runtime.admin),
        *dashboard.routes(runtime.settings),
    ])  # fmt: skip


def create_app(runtime: Runtime, routes: RouteTable | None = None) -> falcon.App:
    table = routes or route_table(runtime)
    context = RequestContext(runtime.stats, runtime.settings.cors_allowed_origins)
    middleware = (
        context,
        Authentication(runtime.auth, table),
        ReportIgnoredParameters(runtime.ignored, table),
    )
    app = falcon.App(middleware=middleware, cors_enable=False)
    app.req_options.auto_parse_qs_csv = False
    app.req_options.keep_blank_qs_values = True
    errors.install(app)
    table.install(app)
    return app
