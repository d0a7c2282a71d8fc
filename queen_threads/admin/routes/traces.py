"""Message traces: record events on a message and read them back.

POST /api/v1/traces  {transactionId, partitionId, data, traceNames?, consumerGroup?, eventType?}
GET  /api/v1/traces/{partitionId}/{transactionId}
GET  /api/v1/traces/by-name/{name}?limit=100&offset=0
GET  /api/v1/traces/names?limit=50&offset=0
"""

from __future__ import annotations

import falcon

from queen_threads.admin import body
from queen_threads.admin.store import AdminStore
from queen_threads.http.params import message_key, page
from queen_threads.http.request import json_object, media


class Traces:
    def __init__(self, store: AdminStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        trace = body.trace(json_object(req, self.body_limit, known=body.TRACE_FIELDS))
        media(resp, {"success": True, "traceId": self.store.add_trace(**trace)}, 201)


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
        media(resp, self.store.traces_by_name(body.trace_name(name), limit, offset))


class TraceNames:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit, offset = page(req, resp, 50)
        media(resp, self.store.trace_names(limit, offset))
