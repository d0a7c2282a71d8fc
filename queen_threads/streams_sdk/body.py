"""The bodies of the /streams/v1 routes as the official clients' `Stream` runtime sends
them (`queen/streams/runtime/`: register.py, cycle.py, state.py, runner.py), checked and
normalised for the stored functions (schema/functions/97b_streams_sdk.sql). Unknown fields
are ignored; a known field with a bad value is a 400 that changes nothing."""

from __future__ import annotations

from typing import Any

from queen_threads import validation as v
from queen_threads.errors import ValidationError
from queen_threads.queue.body import ACK_STATUSES, MAX_TRANSACTION_ID, push_items
from queen_threads.telemetry.context import OnInvalid, TraceContext

MAX_HASH = 255
MAX_KEY = 10_000
MAX_KEY_BYTES = 2048  # a state key is in the state's primary key (a btree entry is < 2.7 kB)
STATE_OPS = ("upsert", "delete")
# The top-level fields each route reads; any other is ignored and reported (http/ignored.py).
REGISTER_FIELDS = frozenset({"name", "source_queue", "sink_queue", "config_hash", "reset"})
CYCLE_FIELDS = frozenset({
    "query_id", "partition_id", "consumer_group", "state_ops", "push_items", "ack",
    "release_lease",
})  # fmt: skip
STATE_GET_FIELDS = frozenset(
    {"query_id", "partition_id", "keys", "key_prefix", "ripe_at_or_before"}
)


def _text(body: dict[str, Any], field: str, max_len: int = MAX_HASH) -> str:
    value = v.optional_str(body.get(field), field, max_len)
    if not value:
        raise ValidationError(f"{field} is required (a non-empty string)")
    return value


def _uuid(body: dict[str, Any], field: str) -> str:
    value = v.uuid_str(body.get(field), field)
    if value is None:
        raise ValidationError(f"{field} is required (a UUID)")
    return value


def _flag(body: dict[str, Any], field: str, default: bool) -> bool:
    value = v.optional_bool(body.get(field), field)
    return default if value is None else value


def register_body(body: dict[str, Any]) -> dict[str, Any]:
    """{name, source_queue, config_hash, reset?, sink_queue?}."""
    if body.get("name") is None:
        raise ValidationError("name is required (the query's name)")
    if body.get("source_queue") is None:
        raise ValidationError("source_queue is required")
    return {
        "name": v.name(body["name"], "Query"),
        "sourceQueue": v.name(body["source_queue"], "Queue"),
        "sinkQueue": v.optional_name(body.get("sink_queue") or None, "Queue"),
        "configHash": _text(body, "config_hash"),
        "reset": _flag(body, "reset", False),
    }


def state_op(op: Any, index: int) -> dict[str, Any]:
    if not isinstance(op, dict):
        raise ValidationError(f"state_ops[{index}] must be a JSON object")
    kind = op.get("type")
    if kind not in STATE_OPS:
        raise ValidationError(f"state_ops[{index}].type must be upsert or delete, got {kind!r}")
    key = v.optional_str(op.get("key"), f"state_ops[{index}].key", MAX_KEY)
    if key is None:
        raise ValidationError(f"state_ops[{index}].key is required (a string)")
    if len(key.encode()) > MAX_KEY_BYTES:
        raise ValidationError(f"state_ops[{index}].key is too long (max {MAX_KEY_BYTES} bytes)")
    if kind == "delete":
        return {"type": kind, "key": key}
    if "value" not in op:
        raise ValidationError(f"state_ops[{index}]: an upsert requires a value")
    return {"type": kind, "key": key, "value": op["value"]}


def ack(value: Any) -> dict[str, Any] | None:
    """{transactionId, leaseId, status?, count?, error?} or null (a cycle without an ack)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("ack must be a JSON object or null")
    status = value.get("status") or "completed"
    if status not in ACK_STATUSES:
        raise ValidationError(f"ack.status: use one of {', '.join(ACK_STATUSES)}")
    return {
        "transactionId": _text(value, "transactionId", MAX_TRANSACTION_ID),
        "leaseId": _uuid(value, "leaseId"),
        "status": status,
        "error": v.optional_str(value.get("error"), "ack.error"),
    }


def cycle_body(
    body: dict[str, Any],
    producer_sub: str | None,
    context: TraceContext | None = None,
    on_invalid: OnInvalid | None = None,
) -> dict[str, Any]:
    """{query_id, partition_id, consumer_group?, state_ops?, push_items?, ack?,
    release_lease?}; pushed messages carry the caller's token `sub`, as on /push, and
    its W3C trace context (`context`, unless an item carries its own)."""
    ops = body.get("state_ops")
    items = body.get("push_items")
    if ops is not None and not isinstance(ops, list):
        raise ValidationError("state_ops must be an array")
    if items is not None and not isinstance(items, list):
        raise ValidationError("push_items must be an array")
    group = body.get("consumer_group") or None
    return {
        "queryId": _uuid(body, "query_id"),
        "partitionId": _uuid(body, "partition_id"),
        "consumerGroup": v.optional_name(group, "Consumer group", v.QUEUE_MODE),
        "stateOps": [state_op(op, i) for i, op in enumerate(ops or ())],
        "pushItems": push_items(items or [], producer_sub, context, on_invalid),
        "ack": ack(body.get("ack")),
        "releaseLease": _flag(body, "release_lease", True),
    }


def state_get_body(body: dict[str, Any]) -> dict[str, Any]:
    """{query_id, partition_id, keys?, key_prefix?, ripe_at_or_before?}."""
    keys = body.get("keys")
    if keys is not None and not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise ValidationError("keys must be an array of strings")
    ripe = body.get("ripe_at_or_before")
    if ripe is not None and (isinstance(ripe, bool) or not isinstance(ripe, int | float)):
        raise ValidationError("ripe_at_or_before must be a number (epoch milliseconds)")
    return {
        "queryId": _uuid(body, "query_id"),
        "partitionId": _uuid(body, "partition_id"),
        "keys": keys or [],
        "keyPrefix": v.optional_str(body.get("key_prefix"), "key_prefix", MAX_KEY),
        "ripeAtOrBefore": ripe,
    }
