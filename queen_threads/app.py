"""create_app(): routes, middleware and error handlers around a Runtime."""

from __future__ import annotations

import falcon

from queen_threads.http import errors
from queen_threads.http.middleware import RequestContext
from queen_threads.resources.health import Health
from queen_threads.runtime import Runtime


def create_app(runtime: Runtime) -> falcon.App:
    app = falcon.App(middleware=[RequestContext(runtime.stats)], cors_enable=False)
    app.req_options.auto_parse_qs_csv = False
    app.req_options.keep_blank_qs_values = True
    app.resp_options.secure_cookies_by_default = False
    errors.install(app)
    app.add_route("/health", Health(runtime))
    return app
