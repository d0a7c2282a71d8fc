"""POST /api/v1/transaction: pushes and acks in one PostgreSQL transaction (pushed
messages are stamped with the token's `sub` as producerSub, as on /push). A transaction
rolled back because a push item found its queue full answers 409 with `Retry-After`, as
a push does.

The `kv` rider (docs/kv.md) carries key/value operations and lock guards into the same
transaction; a lost `required` precondition rolls everything back and answers 200
{success: false, reason: "kv_precondition", failedIndex, kvReason, version, value}."""

from __future__ import annotations

from typing import Any

import falcon

from queen_threads import validation as v
from queen_threads.http.auth import producer_sub
from queen_threads.http.request import json_object, media
from queen_threads.kv import ops as kv_ops
from queen_threads.resources.push import retry_after_when_full
from queen_threads.runtime import Runtime


def operation(op: Any, sub: str | None) -> dict[str, Any]:
    if not isinstance(op, dict):
        raise v.ValidationError("Each operation must be a JSON object")
    kind = op.get("type")
    if kind == "push":
        items = v.items_list(op, "items", "push operation requires an items array")
        return {"type": "push", "items": v.push_items(items, sub)}
    if kind == "ack":
        return {"type": "ack", **v.ack_item(op)}
    raise v.ValidationError(f"Unknown operation type {kind!r}: use push or ack")


def riders(body: dict[str, Any]) -> dict[str, Any]:
    """The riders the body carries, validated (an empty or null one is no rider)."""
    kv = body.get("kv")
    return {"kv": kv_ops.operations(kv, in_transaction=True)} if kv else {}


class Transaction:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.runtime.settings.max_body_size)
        if "operations" not in body:
            raise v.ValidationError("operations array required")
        raw = v.items_list(body, "operations", "operations array required")
        extra = riders(body)
        if not raw and not extra:
            raise v.ValidationError("operations array cannot be empty")
        sub = producer_sub(req)
        result = self.runtime.queues.transaction([operation(op, sub) for op in raw], extra)
        retry_after_when_full(resp, result.get("results") or [])
        verdict = result.get("success") or result.get("reason") == "kv_precondition"
        media(resp, result, 200 if verdict else 409)
