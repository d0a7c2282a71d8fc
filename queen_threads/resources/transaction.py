"""POST /api/v1/transaction: pushes and acks in one PostgreSQL transaction (pushed
messages are stamped with the token's `sub` as producerSub, as on /push). Each ack is
fenced by its lease (its own leaseId, or the one lease `requiredLeases` names): an ack
under an expired or foreign lease rolls the whole bundle back. A transaction rolled back
because a push item found its queue full answers 409 with `Retry-After`, as a push does.

Riders commit in the same transaction: `kv` (docs/kv.md) carries key/value operations and
lock guards (a lost `required` precondition rolls everything back and answers 200
{success: false, reason: "kv_precondition", failedIndex, kvReason, version, value});
`timers` carries timer schedules and cancels (docs/timers.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import falcon

from queen_threads import validation as v
from queen_threads.http.auth import producer_sub
from queen_threads.http.request import json_object, media
from queen_threads.kv import body as kv_ops
from queen_threads.queue.service import QueueService
from queen_threads.resources.push import retry_after_when_full
from queen_threads.timers import body as timer_ops

FIELDS = ("operations", "requiredLeases", "kv", "timers")
UNSUPPORTED_RIDERS = frozenset({"timers"})  # never ignored: preconditions must not vanish
MAX_REQUIRED_LEASES = 10_000


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


def riders(body: dict[str, Any], sub: str | None) -> dict[str, Any]:
    """The riders the body carries, validated (an empty or null one is no rider)."""
    kv, timers = body.get("kv"), body.get("timers")
    return ({"kv": kv_ops.operations(kv, in_transaction=True)} if kv else {}) | (
        {"timers": timer_ops.operations(timers, sub, "timers")} if timers else {}
    )


class Transaction:
    def __init__(
        self,
        queues: QueueService,
        scheduled: Callable[[list[dict[str, Any]], float], None],
        body_limit: int,
    ) -> None:
        self.queues = queues
        self.scheduled = scheduled  # the timers' lateness clock (TimerService.scheduled)
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.body_limit, known=FIELDS)
        if "operations" not in body:
            raise v.ValidationError("operations array required")
        raw = v.items_list(body, "operations", "operations array required")
        leases = required_leases(body.get("requiredLeases"))
        sub = producer_sub(req)
        extra = riders(body, sub)
        if not raw and not extra:
            raise v.ValidationError("operations array cannot be empty")
        ops = [operation(op, sub) for op in raw]
        sent = time.monotonic()
        result = self.queues.transaction(ops, leases, extra)
        if result.get("success") and extra.get("timers"):
            self.scheduled(extra["timers"], sent)
        retry_after_when_full(resp, result.get("results") or [])
        verdict = result.get("success") or result.get("reason") == "kv_precondition"
        media(resp, result, 200 if verdict else 409)
