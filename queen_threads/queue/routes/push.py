"""POST /api/v1/push: a batch of items, committed atomically; 201 with per-item results.

Each stored message's producerSub is the `sub` of the request's verified token (NULL with
auth off); a `producerSub` in the body is ignored either way. Items a full queue refused
(`reason: queue_full`) make the answer carry `Retry-After` (queue/capacity.py); the
status stays 201 because the official client reads the per-item results only from a 2xx.

Each message keeps the W3C trace context of its push (the `traceparent` / `tracestate`
headers, or an item's own fields), returned by every pop as `traceContext`
(docs/observability.md).
"""

from __future__ import annotations

from typing import Any

import falcon

from queen_threads import validation as v
from queen_threads.http.auth import producer_sub
from queen_threads.http.request import json_object, media
from queen_threads.queue import capacity
from queen_threads.queue.body import PUSH_FIELDS, push_items
from queen_threads.queue.service import QueueService
from queen_threads.telemetry import annotate
from queen_threads.telemetry.incoming import request_context
from queen_threads.telemetry.metrics import count_invalid


def retry_after_when_full(resp: falcon.Response, results: list[dict[str, Any]]) -> None:
    """Tell a producer that a queue refused items for size when it may try again."""
    if capacity.any_refused_for_size(results):
        resp.set_header("Retry-After", str(capacity.RETRY_AFTER_S))


class Push:
    def __init__(self, queues: QueueService, body_limit: int) -> None:
        self.queues = queues
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.body_limit, known=PUSH_FIELDS)
        raw = v.items_list(body, "items", "items array is required")
        sub = producer_sub(req)
        items = push_items(raw, sub, request_context(req), count_invalid)
        annotate.sent(req, items)
        results = self.queues.push(items) if items else []
        retry_after_when_full(resp, results)
        media(resp, results, 201)
