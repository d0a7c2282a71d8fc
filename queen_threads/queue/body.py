"""What the queue core's requests may carry: push items, acks, a pop's subscription, a
queue's configuration. Each function returns a normalised structure ready for the stored
function, or raises ValidationError (answered 400, nothing changed)."""

from __future__ import annotations

import uuid
from typing import Any

from queen_threads.errors import ValidationError
from queen_threads.telemetry.context import OnInvalid, TraceContext, for_item
from queen_threads.validation import (
    DEFAULT_PARTITION,
    QUEUE_MODE,
    name,
    optional_bool,
    optional_name,
    optional_str,
    timestamp,
    uuid_str,
)

ACK_STATUSES = ("completed", "success", "failed", "dlq", "retry")
RETRY_STRATEGIES = ("fixed", "exponential", "linear")
MAX_ERROR_TYPE = 255
SUBSCRIPTION_MODES = ("", "all", "from_beginning", "new", "new-only")
MAX_TRANSACTION_ID = 255
# The top-level fields each body may carry (any other is ignored and named).
PUSH_FIELDS = ("items",)
ACK_FIELDS = ("transactionId", "partitionId", "status", "error", "errorType", "retryable",
              "consumerGroup", "leaseId")  # fmt: skip
ACK_BATCH_FIELDS = ("acknowledgments", "consumerGroup")
CONFIGURE_FIELDS = ("queue", "namespace", "task", "options")
LEASE_FIELDS = ("seconds",)  # what a lease extension's body may carry


def push_item(
    item: Any,
    producer_sub: str | None = None,
    valid_names: set[str] | None = None,
    context: TraceContext | None = None,
    on_invalid: OnInvalid | None = None,
) -> dict[str, Any]:
    """One push item: {queue, partition, payload, transactionId, traceId, producerSub,
    traceContext (only when there is one)}.
    `valid_names`: names already checked (a request's items mostly share theirs); the
    names this item passes are added to it. `context`: the request's W3C trace context
    (its headers), the item's unless it carries its own `traceparent` (telemetry/context.py;
    an invalid one is ignored and told to `on_invalid`, never a 400)."""
    if not isinstance(item, dict):
        raise ValidationError("Each item must be a JSON object")
    queue = item.get("queue")
    if queue is None:
        raise ValidationError("Queue is required on every item")
    tid = optional_str(item.get("transactionId"), "TransactionId", MAX_TRANSACTION_ID)
    if tid == "":
        raise ValidationError("TransactionId must not be empty")
    partition = item.get("partition")
    if partition is None:
        partition = DEFAULT_PARTITION
    seen = valid_names if valid_names is not None else set()
    if not (type(queue) is str and queue in seen):
        seen.add(name(queue, "Queue"))
    if not (type(partition) is str and partition in seen):
        seen.add(name(partition, "Partition"))
    trace = item.get("traceId")
    clean = {
        "queue": queue,
        "partition": partition,
        "payload": item.get("payload"),
        "transactionId": tid or str(uuid.uuid4()),
        "traceId": None if trace is None else uuid_str(trace, "TraceId"),
        "producerSub": producer_sub,
    }
    if context is not None or "traceparent" in item:
        carried = for_item(item, context, on_invalid)
        if carried is not None:
            clean["traceContext"] = carried
    return clean


def push_items(
    items: list[Any],
    producer_sub: str | None = None,
    context: TraceContext | None = None,
    on_invalid: OnInvalid | None = None,
) -> list[dict[str, Any]]:
    """push_item for each item of one request, each distinct name checked once."""
    valid_names: set[str] = set()
    return [push_item(item, producer_sub, valid_names, context, on_invalid) for item in items]


def ack_item(item: Any, group: str | None = None) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ValidationError("Each acknowledgment must be a JSON object")
    tid = item.get("transactionId")
    if not isinstance(tid, str) or not tid:
        raise ValidationError("Each acknowledgment must have a valid transactionId string")
    pid = item.get("partitionId")
    if not isinstance(pid, str) or not pid:
        raise ValidationError(
            "Each acknowledgment must have a valid partitionId string to ensure message uniqueness"
        )
    status = item.get("status", "completed")
    if status is None:
        status = "completed"
    if status not in ACK_STATUSES:
        raise ValidationError(f"Unknown status {status!r}: use one of {', '.join(ACK_STATUSES)}")
    return {
        "transactionId": tid,
        "partitionId": uuid_str(pid, "partitionId"),
        "status": status,
        "error": optional_str(item.get("error"), "error"),
        "errorType": optional_str(item.get("errorType"), "errorType", MAX_ERROR_TYPE),
        "retryable": optional_bool(item.get("retryable"), "retryable"),
        "consumerGroup": optional_name(
            group if group is not None else item.get("consumerGroup"), "Consumer group", QUEUE_MODE
        ),
        "leaseId": optional_str(item.get("leaseId"), "leaseId", 64) or None,
    }


def subscription(mode: str | None, start: str | None) -> tuple[str | None, str | None]:
    if mode is not None and mode not in SUBSCRIPTION_MODES:
        raise ValidationError(
            f"Unknown subscriptionMode {mode!r}: use one of all, from_beginning, new, new-only"
        )
    if start is not None and start != "now":
        start = timestamp(start, "subscriptionFrom")
    return mode, start


INT_OPTIONS = ("leaseTime", "maxSize", "ttl", "retryLimit", "retryDelay", "retryDelayMax",
               "priority", "delayedProcessing", "windowBuffer", "retentionSeconds",
               "completedRetentionSeconds", "maxWaitTimeSeconds")  # fmt: skip
BOOL_OPTIONS = ("deadLetterQueue", "dlqAfterMaxRetries", "retentionEnabled", "encryptionEnabled")
MAX_OPTION = 2**31 - 1


def _int_option(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"options.{key} must be an integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValidationError(f"options.{key} must be an integer")
    if not 0 <= value <= MAX_OPTION:
        raise ValidationError(f"options.{key} must be between 0 and {MAX_OPTION}")
    return int(value)


def _retry_options(options: dict[str, Any]) -> dict[str, Any]:
    """retryStrategy (a name) and retryJitter (a share of the delay, 0..1): the retry
    policy options that are not integers (docs/retries.md)."""
    clean: dict[str, Any] = {}
    strategy = options.get("retryStrategy")
    if strategy is not None:
        if strategy not in RETRY_STRATEGIES:
            raise ValidationError(
                f"options.retryStrategy must be one of {', '.join(RETRY_STRATEGIES)}, "
                f"got {strategy!r}"
            )
        clean["retryStrategy"] = strategy
    jitter = options.get("retryJitter")
    if jitter is not None:
        if isinstance(jitter, bool) or not isinstance(jitter, int | float):
            raise ValidationError("options.retryJitter must be a number between 0 and 1")
        if not 0 <= jitter <= 1:  # NaN fails this too
            raise ValidationError(f"options.retryJitter must be between 0 and 1, got {jitter}")
        clean["retryJitter"] = jitter
    return clean


ENCRYPTION_KEY_REQUIRED = (
    "options.encryptionEnabled requires QUEEN_ENCRYPTION_KEY, which is not set on this "
    "server: set it (64 hex characters) or configure the queue without encryption"
)


def encryption_key_present(body: dict[str, Any], has_key: bool) -> None:
    """A configure body asking for encryption on a server without a key would store plain
    text: ValidationError (400), nothing changed."""
    options = body.get("options")
    if isinstance(options, dict) and options.get("encryptionEnabled") is True and not has_key:
        raise ValidationError(ENCRYPTION_KEY_REQUIRED)


def configure_body(body: dict[str, Any]) -> dict[str, Any]:
    if body.get("queue") is None:
        raise ValidationError("queue is required")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise ValidationError("options must be a JSON object")
    clean: dict[str, Any] = {}
    for key in INT_OPTIONS:
        if options.get(key) is not None:
            clean[key] = _int_option(key, options[key])
    for key in BOOL_OPTIONS:
        if options.get(key) is not None:
            if not isinstance(options[key], bool):
                raise ValidationError(f"options.{key} must be a boolean")
            clean[key] = options[key]
    clean.update(_retry_options(options))
    ns, task = body.get("namespace"), body.get("task")
    return {
        "queue": name(body["queue"], "Queue"),
        "namespace": ns if isinstance(ns, str) else None,
        "task": task if isinstance(task, str) else None,
        "options": clean,
    }
