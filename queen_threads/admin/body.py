"""What the administration routes' bodies may carry, and their checks.

Each route reads the top-level fields its `<BODY>_FIELDS` names; any other is ignored and
named in `Queen-Ignored-Parameters` (http/ignored.py). A bad value of a known field is a
ValidationError (400) and nothing changes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from queen_threads import validation as v
from queen_threads.errors import ValidationError
from queen_threads.http.params import iso_time, message_key
from queen_threads.queue.body import ack_item

# POST /api/v1/consumer-groups/{group}/subscription
SUBSCRIPTION_FIELDS = ("subscriptionTimestamp",)
# POST /api/v1/consumer-groups/{group}/queues/{queue}[/partitions/{partition}]/seek
SEEK_FIELDS = ("toEnd", "timestamp")
# POST /api/v1/traces
TRACE_FIELDS = ("transactionId", "partitionId", "data", "traceNames", "consumerGroup",
                "eventType")  # fmt: skip
# POST /api/v1/messages/{partitionId}/{transactionId}/dlq (`errorMessage`: `error`'s other name)
MOVE_TO_DLQ_FIELDS = ("consumerGroup", "error", "errorMessage")
# POST /api/v1/stats/refresh: takes no options
STATS_REFRESH_FIELDS = ()

MAX_NAMES = 100
MAX_NAME_LENGTH = 255
MAX_EVENT_TYPE_LENGTH = 64
MANUAL_DLQ_ERROR = "Moved to the dead-letter queue by an administrator"


def subscription_moment(body: dict[str, Any]) -> datetime:
    """The new subscription time of a group (required)."""
    if body.get("subscriptionTimestamp") is None:
        raise ValidationError("subscriptionTimestamp is required")
    return iso_time(body["subscriptionTimestamp"], "subscriptionTimestamp")


def seek_target(body: dict[str, Any]) -> tuple[bool, datetime | None]:
    """(toEnd, timestamp) from a seek body: exactly one of them."""
    to_end = body.get("toEnd", False)
    if not isinstance(to_end, bool):
        raise ValidationError("toEnd must be a boolean")
    raw = body.get("timestamp")
    if to_end and raw is not None:
        raise ValidationError("Send either toEnd or timestamp, not both")
    if not to_end and raw is None:
        raise ValidationError("toEnd or timestamp is required")
    return to_end, None if to_end else iso_time(raw, "timestamp")


def trace_name(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_LENGTH:
        raise ValidationError(
            f"Each trace name must be a string of 1 to {MAX_NAME_LENGTH} characters"
        )
    return value


def trace_names(value: Any) -> list[str]:
    """traceNames: null, one string, or a list of strings (deduplicated, order kept)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [trace_name(value)]
    if not isinstance(value, list) or len(value) > MAX_NAMES:
        raise ValidationError(
            f"traceNames must be a string or a list of at most {MAX_NAMES} strings"
        )
    return list(dict.fromkeys(trace_name(item) for item in value))


def trace(body: dict[str, Any]) -> dict[str, Any]:
    """A trace event, as `AdminStore.add_trace` takes it: {partition_id, transaction_id,
    data, names, group, event_type}."""
    tid = body.get("transactionId")
    pid = body.get("partitionId")
    if not isinstance(tid, str) or not tid or not isinstance(pid, str) or not pid:
        raise ValidationError("transactionId and partitionId are required")
    if body.get("data") is None:
        raise ValidationError("data is required")
    event_type = v.optional_str(body.get("eventType"), "eventType", MAX_EVENT_TYPE_LENGTH)
    partition_id, transaction_id = message_key(pid, tid)
    return {
        "partition_id": partition_id,
        "transaction_id": transaction_id,
        "data": body["data"],
        "names": trace_names(body.get("traceNames")),
        "group": v.optional_str(body.get("consumerGroup"), "consumerGroup", MAX_NAME_LENGTH),
        "event_type": event_type or "info",
    }


def move_to_dlq(body: dict[str, Any], pid: str, tid: str) -> dict[str, Any]:
    """The ack item (status dlq) that moves message (pid, tid) to the DLQ for a group."""
    group = v.optional_name(body.get("consumerGroup"), "Consumer group", v.QUEUE_MODE)
    error = v.optional_str(body.get("error", body.get("errorMessage")), "error")
    return ack_item({"transactionId": tid, "partitionId": pid, "status": "dlq",
                     "error": error or MANUAL_DLQ_ERROR, "consumerGroup": group})  # fmt: skip
