"""The official clients' streaming SDK routes (docs/streams.md, "The SDK's API"):
POST /streams/v1/queries (register), /streams/v1/cycle (commit a cycle),
/streams/v1/state/get (read state); GET /streams/v1/queries (list, with state size and
lag) and DELETE /streams/v1/queries/{name}. Refusals answer {success: false, error} with
their real status (400, 404, 409) and change nothing."""

from __future__ import annotations

import falcon

from queen_threads.errors import NotFound
from queen_threads.http.auth import producer_sub
from queen_threads.http.request import json_object, media
from queen_threads.http.routes import ADMIN, RO, RW, Route, route
from queen_threads.streams_sdk import body
from queen_threads.streams_sdk.service import StreamsSdk
from queen_threads.telemetry.incoming import request_context
from queen_threads.telemetry.metrics import count_invalid

PREFIX = "/streams/v1"


class Queries:
    def __init__(self, sdk: StreamsSdk, body_limit: int) -> None:
        self.sdk = sdk
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = json_object(req, self.body_limit, known=body.REGISTER_FIELDS)
        media(resp, self.sdk.register(body.register_body(raw)))

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, {"queries": self.sdk.queries()})


class Query:
    def __init__(self, sdk: StreamsSdk, body_limit: int) -> None:
        self.sdk = sdk
        self.body_limit = body_limit

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        if not self.sdk.delete(name):
            raise NotFound(f"Query not found: {name}")
        media(resp, {"success": True, "deleted": True, "name": name})


class Cycle:
    def __init__(self, sdk: StreamsSdk, body_limit: int) -> None:
        self.sdk = sdk
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = json_object(req, self.body_limit, known=body.CYCLE_FIELDS)
        checked = body.cycle_body(raw, producer_sub(req), request_context(req), count_invalid)
        media(resp, self.sdk.cycle(checked))


class StateGet:
    def __init__(self, sdk: StreamsSdk, body_limit: int) -> None:
        self.sdk = sdk
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = json_object(req, self.body_limit, known=body.STATE_GET_FIELDS)
        media(resp, self.sdk.state(body.state_get_body(raw)))


def routes(sdk: StreamsSdk, body_limit: int) -> list[Route]:
    """Cycles read-write, reading state read-only, deleting a query admin."""
    return [
        route(f"{PREFIX}/queries", Queries(sdk, body_limit), GET=RO, POST=RW),
        route(f"{PREFIX}/queries/{{name}}", Query(sdk, body_limit), DELETE=ADMIN),
        route(f"{PREFIX}/cycle", Cycle(sdk, body_limit), POST=RW),
        route(f"{PREFIX}/state/get", StateGet(sdk, body_limit), POST=RO),
    ]
