"""Message traces: record events on a message and read them back.

POST /api/v1/traces  {transactionId, partitionId, data, traceNames?, consumerGroup?, eventType?}
GET  /api/v1/traces/{partitionId}/{transactionId}
GET  /api/v1/traces/by-name/{name}?limit=100&offset=0
GET  /api/v1/traces/names?limit=50&offset=0
"""

from __future__ import annotations

from typing import Any

import falcon

from queen_threads import validation as v
from queen_threads.admin.store import AdminStore
from queen_threads.errors import ValidationError
from queen_threads.http.params import message_key, page
from queen_threads.http.request import json_object, media

MAX_NAMES = 100
MAX_NAME_LENGTH = 255
MAX_EVENT_TYPE_LENGTH = 64


def trace_name(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_LENGTH:
        raise ValidationError(
            f"Each trace name must be a string of 1 to {MAX_NAME_LENGTH} characters"
        )
    return value


def trace_names(value: Any) -> list[str]:
    """traceNames: null, one string, or a list of strings (deduplicated, order kept)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [trace_name(value)]
    if not isinstance(value, list) or len(value) > MAX_NAMES:
        raise ValidationError(
            f"traceNames must be a string or a list of at most {MAX_NAMES} strings"
        )
    return list(dict.fromkeys(trace_name(item) for item in value))


class Traces:
    def __init__(self, store: AdminStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.body_limit)
        tid = body.get("transactionId")
        pid = body.get("partitionId")
        if not isinstance(tid, str) or not tid or not isinstance(pid, str) or not pid:
            raise ValidationError("transactionId and partitionId are required")
        if body.get("data") is None:
            raise ValidationError("data is required")
        event_type = v.optional_str(body.get("eventType"), "eventType", MAX_EVENT_TYPE_LENGTH)
        trace_id = self.store.add_trace(
            *message_key(pid, tid),
            data=body["data"],
            names=trace_names(body.get("traceNames")),
            group=v.optional_str(body.get("consumerGroup"), "consumerGroup", MAX_NAME_LENGTH),
            event_type=event_type or "info",
        )
        media(resp, {"success": True, "traceId": trace_id}, 201)


class MessageTraces:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, partitionId: str, transactionId: str
    ) -> None:
        media(resp, self.store.traces_for_message(*message_key(partitionId, transactionId)))


class TracesByName:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        limit, offset = page(req, resp, 100)
        media(resp, self.store.traces_by_name(trace_name(name), limit, offset))


class TraceNames:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit, offset = page(req, resp, 50)
        media(resp, self.store.trace_names(limit, offset))
