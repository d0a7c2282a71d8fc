"""Key/value and locks routes (docs/kv.md):

- `POST /api/v1/kv`: a batch of operations (get, getMany, getPrefix, put, putIfAbsent,
  delete, check, incr) in one transaction, answered index-aligned; the whole surface.
- `GET|PUT|DELETE /api/v1/kv/{ns}/{key}`: one key, for curl (the key may contain '/').
- `POST /api/v1/locks`: acquire, renew, release, get of locks and semaphores.

The HTTP status says how the call went, never what an operation answered: a lost
precondition or a held lock is a 200 whose fields say so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import falcon

from queen_threads.http.request import int_param, json_object, media
from queen_threads.http.routes import API, RO, RW, Route, route
from queen_threads.kv import body as ops
from queen_threads.kv import lock_body as lock_ops
from queen_threads.kv.store import KvStore


def operations_of(body: dict[str, Any], bad: Callable[[str, str], Exception], code: str) -> Any:
    """The body's `operations` (a 400 of the surface's `code` when it has none)."""
    if "operations" not in body:
        raise bad(code, "the body needs an operations array")
    return body["operations"]


class KvBatch:
    def __init__(self, store: KvStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.body_limit, known=ops.BATCH_FIELDS)
        batch = ops.operations(operations_of(body, ops.bad, "kv_bad_request"))
        media(resp, self.store.batch(batch) if batch else {"results": []})


class KvKey:
    """One key by path: the same operations and answers as one element of a batch."""

    def __init__(self, store: KvStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def _one(self, resp: falcon.Response, raw: dict[str, Any]) -> None:
        result = self.store.batch([ops.operation(0, raw)])["results"][0]
        if result.get("found") or result.get("applied"):
            resp.set_header("ETag", f'"{result.get("version")}"')
        media(resp, result)

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, key: str) -> None:
        self._one(resp, {"op": "get", "ns": ns, "key": key})

    def on_put(self, req: falcon.Request, resp: falcon.Response, ns: str, key: str) -> None:
        body = json_object(req, self.body_limit, known=ops.PUT_FIELDS)
        fields: dict[str, Any] = {k: body[k] for k in ops.PUT_FIELDS if k in body}
        self._one(resp, {"op": "put", "ns": ns, "key": key, **fields})

    def on_delete(self, req: falcon.Request, resp: falcon.Response, ns: str, key: str) -> None:
        raw: dict[str, Any] = {"op": "delete", "ns": ns, "key": key}
        if req.get_param("expect") is not None:
            raw["expect"] = int_param(req, "expect", 0, 0)
        self._one(resp, raw)


class Locks:
    def __init__(self, store: KvStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.body_limit, known=ops.BATCH_FIELDS)
        batch = lock_ops.operations(operations_of(body, lock_ops.bad, "locks_bad_request"))
        media(resp, {"results": self.store.locks(batch) if batch else []})


def routes(store: KvStore, body_limit: int) -> list[Route]:
    """The batch routes write (reads go through them too)."""
    return [
        route(f"{API}/kv", KvBatch(store, body_limit), POST=RW),
        route(f"{API}/kv/{{ns}}/{{key:path}}", KvKey(store, body_limit),
              GET=RO, PUT=RW, DELETE=(RW, {"expect"})),
        route(f"{API}/locks", Locks(store, body_limit), POST=RW),
    ]  # fmt: skip
