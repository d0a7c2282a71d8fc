"""GET /api/v1/dlq: dead-lettered messages with real paging, filters and a total."""

from __future__ import annotations

import falcon

from queen_threads.http.params import name_param, page, time_range
from queen_threads.http.request import media
from queen_threads.queue.admin_store import AdminStore

DEFAULT_LIMIT = 100


class DeadLetters:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit, offset = page(req, DEFAULT_LIMIT)
        start, end = time_range(req)
        media(resp, self.store.dlq(
            queue=name_param(req, "queue", "Queue"),
            partition=name_param(req, "partition", "Partition"),
            group=name_param(req, "consumerGroup", "Consumer group"),
            from_ts=start, to_ts=end, limit=limit, offset=offset,
        ))  # fmt: skip
