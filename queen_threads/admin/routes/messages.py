"""Messages: listing, detail, delete, requeue from the DLQ, move to the DLQ.

GET    /api/v1/messages?queue=&partition=&ns=&task=&status=&from=&to=&limit=200&offset=0
GET    /api/v1/messages/{partitionId}/{transactionId}
DELETE /api/v1/messages/{partitionId}/{transactionId}
POST   /api/v1/messages/{partitionId}/{transactionId}/retry   body {consumerGroup?} or empty
POST   /api/v1/messages/{partitionId}/{transactionId}/dlq     body {consumerGroup?, error?}
"""

from __future__ import annotations

import falcon

from queen_threads.admin.body import MOVE_TO_DLQ_FIELDS, move_to_dlq
from queen_threads.admin.store import AdminStore
from queen_threads.errors import NotFound, ValidationError
from queen_threads.http.params import MESSAGE_FILTERS, message_filters, message_key, name_param
from queen_threads.http.request import json_object, media, str_param
from queen_threads.queue.service import QueueService

DEFAULT_LIMIT = 200
PARAMS = MESSAGE_FILTERS | {"ns", "namespace", "task", "status"}
# Queue mode's view of a message, as queen._message_states (80_admin.sql) names it.
STATUSES = ("pending", "processing", "completed", "dead_letter")


def namespace_filter(req: falcon.Request) -> str | None:
    """`ns` (the original server's name for it) or `namespace` (the other routes' name)."""
    ns = name_param(req, "ns", "Namespace")
    namespace = name_param(req, "namespace", "Namespace")
    if ns is not None and namespace is not None and ns != namespace:
        raise ValidationError("ns and namespace name different namespaces: send one of them")
    return ns if ns is not None else namespace


def status_filter(req: falcon.Request) -> str | None:
    status = str_param(req, "status")
    if status is not None and status not in STATUSES:
        raise ValidationError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    return status


class MessageList:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.store.messages(
            **message_filters(req, resp, DEFAULT_LIMIT),
            namespace=namespace_filter(req),
            task=name_param(req, "task", "Task"),
            status=status_filter(req),
        ))  # fmt: skip


class Message:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, partitionId: str, transactionId: str
    ) -> None:
        media(resp, self.store.message(*message_key(partitionId, transactionId)))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, partitionId: str, transactionId: str
    ) -> None:
        pid, tid = message_key(partitionId, transactionId)
        result = self.store.delete_message(pid, tid)
        if not result["deleted"]:
            holders = ", ".join(result["leasedBy"])
            error = f"Message is leased by consumer group {holders}: ack it or let the lease expire"
            media(resp, {"error": error, "leasedBy": result["leasedBy"]}, 409)
            return
        media(resp, {"deleted": True, "partitionId": pid, "transactionId": tid})


class MoveToDeadLetter:
    """Dead-letter a message for one group: the same operation as an ack with status dlq
    (allowed for the group's next message or one in its current batch)."""

    def __init__(self, queues: QueueService, body_limit: int) -> None:
        self.queues = queues
        self.body_limit = body_limit

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, partitionId: str, transactionId: str
    ) -> None:
        pid, tid = message_key(partitionId, transactionId)
        body = json_object(req, self.body_limit, allow_empty=True, known=MOVE_TO_DLQ_FIELDS)
        ack = move_to_dlq(body, pid, tid)
        group = ack["consumerGroup"]
        result = self.queues.ack([ack])[0]
        refusal = str(result.get("error") or "")
        if refusal.startswith("Unresolvable transaction"):
            raise NotFound("Message not found")
        if result.get("status") == "failed_dlq":
            media(resp, {"success": True, "partitionId": pid, "transactionId": tid,
                         "consumerGroup": group, "dlq": True})  # fmt: skip
            return
        consumed = not refusal or refusal.startswith("Already committed")
        error = f"Message was already consumed by consumer group {group}" if consumed else refusal
        media(resp, {"success": False, "error": error}, 409)
