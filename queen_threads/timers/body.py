"""Timer operations as the wire carries them (the 2.6.0 client's `queen.timers.ops`),
checked and normalised for the stored functions (schema/functions/98_timers.sql).

    {op: "schedule"|"reschedule", queue, timerKey, payload: base64 of a JSON document,
     delayMs, txn?, partition?, payloadZstd?}
    {op: "cancel", queue, timerKey, txn?}

Every refusal is a `TimerRequestInvalid` (400, code `timers_bad_request`) and nothing is
applied. Fields the server owns (the producer, the message id, an absolute delivery time)
are refused by name rather than dropped; any other unknown field is ignored.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Any

import orjson

from queen_threads import validation as v
from queen_threads.errors import CodedValidationError, ValidationError

OPS = ("schedule", "reschedule", "cancel")
BATCH_FIELDS = ("operations",)  # the top-level fields a batch body may carry
MAX_OPS = 1000  # per call
MAX_KEY = 1024  # characters of a timer key
MAX_TXN = 255  # as a push's transactionId
MAX_DELAY_MS = 10 * 366 * 86_400_000  # ten years, either way: a delay in the past is legal
CODE = "timers_bad_request"


class TimerRequestInvalid(CodedValidationError):
    """A malformed timer call: 400 {"error", "code": "timers_bad_request", "reason",
    "detail"}. Reasons: bad_request, duplicate_key, server_owned_field, invalid_payload,
    unsupported_compression."""

    def __init__(self, detail: str, reason: str = "bad_request") -> None:
        super().__init__(CODE, reason, detail)


def not_an_object() -> TimerRequestInvalid:
    """The refusal of a batch body that is not a JSON object."""
    return TimerRequestInvalid("the body must be a JSON object: {operations: [...]}")


SERVER_OWNED = frozenset({
    "producerSub", "producer_sub", "messageId", "message_id", "tenant", "tenantId",
    "tenant_id", "deliverAt", "deliver_at", "delaySeconds", "delay_seconds", "attempts",
    "claimToken", "claim_token", "claimedUntil",
})  # fmt: skip


def _refuse(exc: TimerRequestInvalid, what: str, index: int) -> TimerRequestInvalid:
    return TimerRequestInvalid(f"{what}[{index}]: {exc.detail}", exc.reason)


def timer_key(value: Any) -> str:
    """A timer key: any text of 1 to MAX_KEY characters but NUL (PostgreSQL text)."""
    if not isinstance(value, str) or not value:
        raise TimerRequestInvalid("timerKey must be a non-empty string")
    if len(value) > MAX_KEY:
        raise TimerRequestInvalid(f"timerKey must be at most {MAX_KEY} characters")
    if "\x00" in value:
        raise TimerRequestInvalid("timerKey must not contain NUL characters")
    return value


def queue_name(value: Any) -> str:
    try:
        return v.name(value, "Queue")
    except ValidationError as exc:
        raise TimerRequestInvalid(str(exc)) from None


def txn_of(value: Any, required: bool) -> str | None:
    if value is None:
        return str(uuid.uuid4()) if required else None
    if not isinstance(value, str) or not value or len(value) > MAX_TXN or "\x00" in value:
        raise TimerRequestInvalid(f"txn must be a string of 1 to {MAX_TXN} characters")
    return value


def payload_of(value: Any, zstd: Any) -> Any:
    """The JSON document a base64 payload carries (a timer becomes a message, and a
    message body is JSON)."""
    if zstd is not None and zstd is not False:
        raise TimerRequestInvalid(
            "payloadZstd is not supported by this server: send the payload uncompressed",
            "unsupported_compression",
        )
    if not isinstance(value, str):
        raise TimerRequestInvalid(
            "payload must be a base64 string (of a JSON document)", "invalid_payload"
        )
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise TimerRequestInvalid("payload is not valid base64", "invalid_payload") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise TimerRequestInvalid(
            "payload must be the base64 of a JSON document", "invalid_payload"
        ) from None


def delay_of(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise TimerRequestInvalid("delayMs must be a number of milliseconds")
    if abs(value) > MAX_DELAY_MS:
        raise TimerRequestInvalid(f"delayMs must be between -{MAX_DELAY_MS} and {MAX_DELAY_MS}")
    return int(value)


def operation(op: Any, producer_sub: str | None) -> dict[str, Any]:
    """One op, normalised: schedules carry the decoded payload, the delay, a txn (minted
    when absent) and the caller's token subject as the message's producer."""
    if not isinstance(op, dict):
        raise TimerRequestInvalid("each operation must be a JSON object")
    owned = sorted(k for k in op if k in SERVER_OWNED or k.startswith("_"))
    if owned:
        raise TimerRequestInvalid(
            f"{', '.join(owned)}: set by the server, not by the caller (the producer comes "
            "from the token, the message id from the broker; only the relative delayMs "
            "says when)",
            "server_owned_field",
        )
    kind = op.get("op")
    if kind not in OPS:
        raise TimerRequestInvalid(f"op must be one of {', '.join(OPS)}, got {kind!r}")
    clean: dict[str, Any] = {
        "op": kind,
        "queue": queue_name(op.get("queue")),
        "timerKey": timer_key(op.get("timerKey")),
    }
    if kind == "cancel":
        clean["txn"] = txn_of(op.get("txn"), required=False)
        return clean
    if "payload" not in op:
        raise TimerRequestInvalid("payload is required to schedule a timer")
    if "delayMs" not in op:
        raise TimerRequestInvalid("delayMs is required to schedule a timer")
    partition = op.get("partition")
    if partition is not None:
        try:
            v.name(partition, "Partition")
        except ValidationError as exc:
            raise TimerRequestInvalid(str(exc)) from None
    clean.update(
        payload=payload_of(op["payload"], op.get("payloadZstd")),
        delayMs=delay_of(op["delayMs"]),
        partition=partition or v.DEFAULT_PARTITION,
        txn=txn_of(op.get("txn"), required=True),
        producerSub=producer_sub,
    )
    return clean


def operations(
    raw: Any, producer_sub: str | None, what: str = "operations"
) -> list[dict[str, Any]]:
    """A call's ops: 1 to MAX_OPS of them, each (queue, timerKey) at most once."""
    if not isinstance(raw, list) or not raw:
        raise TimerRequestInvalid(f"{what} must be a non-empty array of timer operations")
    if len(raw) > MAX_OPS:
        raise TimerRequestInvalid(f"at most {MAX_OPS} timer operations per call, got {len(raw)}")
    clean: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for index, op in enumerate(raw):
        try:
            one = operation(op, producer_sub)
        except TimerRequestInvalid as exc:
            raise _refuse(exc, what, index) from None
        key = (one["queue"], one["timerKey"])
        if key in seen:
            raise TimerRequestInvalid(
                f"{what}[{index}]: timer {key[1]!r} of queue {key[0]} appears twice: a key "
                "may appear at most once per call",
                "duplicate_key",
            )
        seen.add(key)
        clean.append(one)
    return clean


def encode_payload(value: Any) -> str:
    """A stored payload as the wire carries it: base64 of its JSON."""
    return base64.b64encode(orjson.dumps(value)).decode("ascii")
