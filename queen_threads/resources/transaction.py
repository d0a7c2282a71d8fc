"""POST /api/v1/transaction: pushes and acks in one PostgreSQL transaction (pushed
messages are stamped with the token's `sub` as producerSub, as on /push). Each ack is
fenced by its lease (its own leaseId, or the one lease `requiredLeases` names): an ack
under an expired or foreign lease rolls the whole bundle back. A transaction rolled back
because a push item found its queue full answers 409 with `Retry-After`, as a push does."""

from __future__ import annotations

from typing import Any

import falcon

from queen_threads import validation as v
from queen_threads.http.auth import producer_sub
from queen_threads.http.request import json_object, media
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


FIELDS = ("operations", "requiredLeases", "kv", "timers")
RIDERS = frozenset({"kv", "timers"})  # the 2.6.0 client's riders beside `operations`
MAX_REQUIRED_LEASES = 10_000


def required_leases(raw: Any) -> list[str]:
    """`requiredLeases`: the leases the bundle acks under (lease ids, strings)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_REQUIRED_LEASES:
        raise v.ValidationError(
            f"requiredLeases must be an array of at most {MAX_REQUIRED_LEASES} lease ids"
        )
    leases = [v.optional_str(lease, "requiredLeases[]", 64) for lease in raw]
    return [lease for lease in leases if lease]


class Transaction:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.runtime.settings.max_body_size, known=FIELDS)
        if "operations" not in body:
            raise v.ValidationError("operations array required")
        raw = v.items_list(body, "operations", "operations array required")
        if not raw:
            raise v.ValidationError("operations array cannot be empty")
        riders = sorted(RIDERS & body.keys())
        if riders:  # never ignored: a bundle without its preconditions must not commit
            raise v.ValidationError(
                f"This server does not take {' or '.join(riders)} operations in transactions"
            )
        leases = required_leases(body.get("requiredLeases"))
        sub = producer_sub(req)
        result = self.runtime.queues.transaction([operation(op, sub) for op in raw], leases)
        retry_after_when_full(resp, result.get("results") or [])
        media(resp, result, 200 if result.get("success") else 409)
