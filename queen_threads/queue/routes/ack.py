"""POST /api/v1/ack and /api/v1/ack/batch: per-item results, 200."""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.http.request import json_object, media
from queen_threads.queue.body import ACK_BATCH_FIELDS, ACK_FIELDS, ack_item
from queen_threads.queue.service import QueueService


class Ack:
    def __init__(self, queues: QueueService, body_limit: int) -> None:
        self.queues = queues
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.body_limit, known=ACK_FIELDS)
        if not isinstance(body.get("transactionId"), str) or not body["transactionId"]:
            raise v.ValidationError("transactionId is required")
        if not isinstance(body.get("partitionId"), str) or not body["partitionId"]:
            raise v.ValidationError("partitionId is required to ensure message uniqueness")
        media(resp, self.queues.ack([ack_item(body)]))


class AckBatch:
    def __init__(self, queues: QueueService, body_limit: int) -> None:
        self.queues = queues
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.body_limit, known=ACK_BATCH_FIELDS)
        raw = v.items_list(body, "acknowledgments", "acknowledgments array is required")
        if not raw:
            raise v.ValidationError("acknowledgments array cannot be empty")
        group = body.get("consumerGroup")
        acks = [ack_item(item, group) for item in raw]
        media(resp, self.queues.ack(acks))
