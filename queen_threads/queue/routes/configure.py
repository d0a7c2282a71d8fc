"""POST /api/v1/configure: create or update a queue (its detail and deletion are in
admin/routes/listings.py)."""

from __future__ import annotations

import falcon

from queen_threads.http.request import json_object, media
from queen_threads.queue.body import CONFIGURE_FIELDS, configure_body
from queen_threads.queue.store import QueueStore


class Configure:
    def __init__(self, store: QueueStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = configure_body(json_object(req, self.body_limit, known=CONFIGURE_FIELDS))
        media(resp, self.store.configure(body))
