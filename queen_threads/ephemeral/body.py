"""What the ephemeral routes accept: bodies and pop parameters, checked before the store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from queen_threads import validation as v
from queen_threads.errors import ValidationError
from queen_threads.telemetry.context import OnInvalid, TraceContext, for_item

POLICIES = ("reject", "drop_oldest")
ACK_STATUSES = ("completed", "success", "failed", "retry")
MAX_MESSAGES = 10_000
"""Messages one push may carry."""
MAX_BATCH = 10_000
# The top-level fields each body may carry (others are ignored and named).
CONFIGURE_FIELDS = ("queue", "options")
RESET_FIELDS = ("queue",)
PUSH_FIELDS = ("queue", "partition", "messages")
ACK_FIELDS = ("queue", "group", "acks")
MAX_INT = 2**31 - 1
GROUP_QUEUE_MODE = v.QUEUE_MODE


def _int(value: Any, what: str, minimum: int, maximum: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ValidationError(f"{what} must be an integer between {minimum} and {maximum}")
    return value


def queue_name(body: dict[str, Any]) -> str:
    return v.name(body.get("queue"), "queue")


def configure_body(body: dict[str, Any]) -> dict[str, Any]:
    """{queue, options}: only the options given, each in its range."""
    options = body.get("options", {})
    if not isinstance(options, dict):
        raise ValidationError("options must be an object")
    checked: dict[str, Any] = {}
    bounds = {
        "maxBytes": (1, 2**40),
        "maxLength": (1, MAX_INT),
        "ttlSeconds": (0, MAX_INT),
        "leaseSeconds": (1, 86_400),
        "retryLimit": (0, 1000),
    }
    for key, (low, high) in bounds.items():
        if options.get(key) is not None:
            checked[key] = _int(options[key], f"options.{key}", low, high)
    policy = options.get("policy")
    if policy is not None:
        if policy not in POLICIES:
            raise ValidationError(f"options.policy must be one of {', '.join(POLICIES)}")
        checked["policy"] = policy
    window = options.get("windowBuffer")
    if window is not None:
        if not isinstance(window, dict):
            raise ValidationError("options.windowBuffer must be an object {ms, count}")
        checked["windowBuffer"] = {
            k: _int(window[k], f"options.windowBuffer.{k}", 0, 600_000 if k == "ms" else MAX_BATCH)
            for k in ("ms", "count")
            if window.get(k) is not None
        }
    return {"queue": queue_name(body), "options": checked}


def push_body(
    body: dict[str, Any],
    context: TraceContext | None = None,
    on_invalid: OnInvalid | None = None,
) -> dict[str, Any]:
    """{queue, partition (default "Default"), messages: [{payload, traceContext?}]}: a
    message keeps `context` (the request's W3C trace context) unless it carries its own
    `traceparent` (telemetry/context.py; an invalid one is ignored and counted)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValidationError("messages must be a non-empty array")
    if len(messages) > MAX_MESSAGES:
        raise ValidationError(f"messages: at most {MAX_MESSAGES} per push, got {len(messages)}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "payload" not in message:
            raise ValidationError(f"messages[{i}] must be an object with a payload")
    return {
        "queue": queue_name(body),
        "partition": v.optional_name(body.get("partition"), "Partition", v.DEFAULT_PARTITION),
        "messages": [_message(m, context, on_invalid) for m in messages],
    }


def _message(
    message: dict[str, Any], context: TraceContext | None, on_invalid: OnInvalid | None
) -> dict[str, Any]:
    if context is None and "traceparent" not in message:
        return {"payload": message["payload"]}
    carried = for_item(message, context, on_invalid)
    if carried is None:
        return {"payload": message["payload"]}
    return {"payload": message["payload"], "traceContext": carried}


def ack_body(body: dict[str, Any]) -> dict[str, Any]:
    """{queue, group (default queue mode), acks: [{id, status (default completed)}]}."""
    acks = body.get("acks")
    if not isinstance(acks, list) or not acks:
        raise ValidationError("acks must be a non-empty array")
    checked = []
    for i, ack in enumerate(acks):
        if not isinstance(ack, dict) or not isinstance(ack.get("id"), str) or not ack["id"]:
            raise ValidationError(f"acks[{i}] must be an object with a message id")
        status = ack.get("status", "completed")
        if status not in ACK_STATUSES:
            raise ValidationError(f"acks[{i}].status must be one of {', '.join(ACK_STATUSES)}")
        checked.append({"id": ack["id"], "status": status})
    group = v.optional_name(body.get("group"), "Group", GROUP_QUEUE_MODE)
    return {"queue": queue_name(body), "group": group, "acks": checked}


@dataclass(frozen=True)
class PopQuery:
    queue: str
    partition: str | None
    group: str
    batch: int
    auto_ack: bool
    wait_ms: int  # 0: answer at once

    def store_args(self, window: bool) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "partition": self.partition,
            "group": self.group,
            "batch": self.batch,
            "autoAck": self.auto_ack,
            "window": window,
        }
