"""POST /api/v1/push: a batch of items, committed atomically; 201 with per-item results.

Each stored message's producerSub is the `sub` of the request's verified token (NULL with
auth off); a `producerSub` in the body is ignored either way.
"""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.http.auth import producer_sub
from queen_threads.http.request import json_object, media
from queen_threads.runtime import Runtime


class Push:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.runtime.settings.max_body_size)
        raw = v.items_list(body, "items", "items array is required")
        sub = producer_sub(req)
        items = [v.push_item(item, sub) for item in raw]
        results = self.runtime.queues.push(items) if items else []
        media(resp, results, 201)
