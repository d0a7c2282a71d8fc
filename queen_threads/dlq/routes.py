"""The dead-letter queue.

GET  /api/v1/dlq: dead-lettered messages with real paging, filters and a total.
POST /api/v1/dlq/requeue: requeue many of them at once (filters or ids, dry run, limit,
     rate); the body rules are in `dlq/body.py`, the run in `dlq/service.py`.
POST /api/v1/messages/{partitionId}/{transactionId}/retry: requeue one of them.
"""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.dlq.body import REQUEUE_FIELDS, RETRY_FIELDS, requeue_plan
from queen_threads.dlq.service import DlqRequeuer
from queen_threads.dlq.store import DlqStore
from queen_threads.errors import ValidationError
from queen_threads.http.connection import client_gone
from queen_threads.http.params import MESSAGE_FILTERS, message_filters, message_key, name_param
from queen_threads.http.request import json_object, media, str_param
from queen_threads.http.routes import API, RO, RW, Route, route

DEFAULT_LIMIT = 100
MAX_ERROR_FILTER = 1000
PARAMS = MESSAGE_FILTERS | {"consumerGroup", "error"}


def error_filter(req: falcon.Request) -> str | None:
    """`error`: a case-insensitive substring of the dead-letter rows' error text."""
    value = str_param(req, "error")
    if value is None or value == "":
        return None
    if len(value) > MAX_ERROR_FILTER:
        raise ValidationError(f"error must be at most {MAX_ERROR_FILTER} characters")
    return value


class DeadLetters:
    def __init__(self, store: DlqStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.store.dlq(
            **message_filters(req, resp, DEFAULT_LIMIT),
            group=name_param(req, "consumerGroup", "Consumer group"),
            error=error_filter(req),
        ))  # fmt: skip


class Requeue:
    """Bulk requeue. A run stops after its current chunk when the client has gone
    (nobody would read the answer; what was requeued stays, a rerun continues)."""

    def __init__(self, store: DlqStore, body_limit: int) -> None:
        self.requeuer = DlqRequeuer(store)
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.body_limit, known=REQUEUE_FIELDS)
        plan = requeue_plan(body)
        result = self.requeuer.run(plan, stop=lambda: client_gone(req.env))
        ignored = sorted(key for key in body if key not in REQUEUE_FIELDS)
        media(resp, {**result, "ignoredFields": ignored} if ignored else result)


class Retry:
    """Requeue a dead-lettered message: a copy goes to the tail of its partition."""

    def __init__(self, store: DlqStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, partitionId: str, transactionId: str
    ) -> None:
        pid, tid = message_key(partitionId, transactionId)
        body = json_object(req, self.body_limit, allow_empty=True, known=RETRY_FIELDS)
        group = v.optional_name(body.get("consumerGroup"), "Consumer group")
        result = self.store.requeue(pid, tid, group)
        media(resp, {
            "success": True, "partitionId": pid, "transactionId": tid,
            "newTransactionId": result["newTransactionId"], "messageId": result["messageId"],
            "queue": result["queue"], "partition": result["partition"],
            "requeuedFor": result["requeuedFor"],
        })  # fmt: skip


def routes(store: DlqStore, body_limit: int) -> list[Route]:
    """Reading is read-only, requeueing read-write."""
    return [
        route(f"{API}/dlq", DeadLetters(store), GET=(RO, PARAMS)),
        route(f"{API}/dlq/requeue", Requeue(store, body_limit), POST=RW),
        route(f"{API}/messages/{{partitionId}}/{{transactionId}}/retry", Retry(store, body_limit),
              POST=RW),
    ]  # fmt: skip
