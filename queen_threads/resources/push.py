"""POST /api/v1/push: a batch of items, committed atomically; 201 with per-item results."""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.http.request import json_object, media
from queen_threads.runtime import Runtime


class Push:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.runtime.settings.max_body_size)
        raw = v.items_list(body, "items", "items array is required")
        items = [v.push_item(item) for item in raw]
        results = self.runtime.queues.push(items) if items else []
        media(resp, results, 201)
