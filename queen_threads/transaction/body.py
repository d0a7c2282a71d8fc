"""What a POST /api/v1/transaction may carry: push and ack operations (the queue core's
rules), the leases it acks under, and its riders (the kv and timers packages' rules)."""

from __future__ import annotations

from typing import Any

from queen_threads import validation as v
from queen_threads.kv import body as kv_ops
from queen_threads.queue.body import ack_item, push_items
from queen_threads.telemetry.context import OnInvalid, TraceContext
from queen_threads.timers import body as timer_ops

TRANSACTION_FIELDS = ("operations", "requiredLeases", "kv", "timers")
MAX_REQUIRED_LEASES = 10_000


def operation(
    op: Any,
    sub: str | None,
    context: TraceContext | None = None,
    on_invalid: OnInvalid | None = None,
) -> dict[str, Any]:
    """One operation; a push's items keep `context` (the request's W3C trace context)
    unless they carry their own (queue/body.py, push_item)."""
    if not isinstance(op, dict):
        raise v.ValidationError("Each operation must be a JSON object")
    kind = op.get("type")
    if kind == "push":
        items = v.items_list(op, "items", "push operation requires an items array")
        return {"type": "push", "items": push_items(items, sub, context, on_invalid)}
    if kind == "ack":
        return {"type": "ack", **ack_item(op)}
    raise v.ValidationError(f"Unknown operation type {kind!r}: use push or ack")


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
