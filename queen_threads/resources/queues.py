"""POST /api/v1/configure: create or update a queue (its detail and deletion are in
resources/listings.py)."""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.http.request import json_object, media
from queen_threads.runtime import Runtime


class Configure:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = v.configure_body(json_object(req, self.runtime.settings.max_body_size))
        media(resp, self.runtime.store.configure(body))
