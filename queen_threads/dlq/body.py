"""The body of POST /api/v1/dlq/requeue, checked before anything runs.

A bulk requeue changes many messages at once. Fields it does not know are ignored, as on
every route, and named in the `Queen-Ignored-Parameters` header, and the answer repeats
them as `ignoredFields` so a `dryRun` shows a misspelt filter (`consumergroup`) before
the real run widens nothing by mistake. A body without any filter is a 400 (`queue` alone
is enough to take a whole queue). A run is bounded: `limit` messages at most, and with
`perSecond` no longer than `MAX_RUN_SECONDS` (the numbers are named in the refusal),
since a request that runs for an hour would outlive proxies, clients and deployments.
"""

from __future__ import annotations

import math
from typing import Any

from queen_threads import validation as v
from queen_threads.dlq.service import RequeuePlan, Selection
from queen_threads.errors import ValidationError
from queen_threads.http.params import MAX_TRANSACTION_ID, iso_time

DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
MAX_PER_SECOND = 10_000
MAX_RUN_SECONDS = 300
MAX_IDS = 10_000
MAX_ERROR_FILTER = 1000
FILTERS = ("queue", "partition", "consumerGroup", "error", "from", "to", "ids")
REQUEUE_FIELDS = (*FILTERS, "dryRun", "limit", "perSecond")
ID_FIELDS = ("partitionId", "transactionId")
RETRY_FIELDS = ("consumerGroup",)  # POST /api/v1/messages/{partitionId}/{transactionId}/retry


def requeue_plan(body: dict[str, Any]) -> RequeuePlan:
    """The validated plan of one request; ValidationError (400) on anything off."""
    selection = _selection(body)
    if selection.is_empty():
        raise ValidationError(
            f"At least one filter is required ({', '.join(FILTERS)}): "
            "send queue alone to requeue everything of a queue"
        )
    dry_run = body.get("dryRun", False)
    if dry_run is None:
        dry_run = False
    if not isinstance(dry_run, bool):
        raise ValidationError("dryRun must be true or false")
    per_second = _int(body, "perSecond", MAX_PER_SECOND)
    limit = _int(body, "limit", MAX_LIMIT)
    return RequeuePlan(selection, _bounded_limit(limit, per_second), per_second, dry_run)


def _selection(body: dict[str, Any]) -> Selection:
    start = iso_time(body["from"], "from") if body.get("from") is not None else None
    end = iso_time(body["to"], "to") if body.get("to") is not None else None
    if start is not None and end is not None and start > end:
        raise ValidationError("from must not be after to")
    error = v.optional_str(body.get("error"), "error", MAX_ERROR_FILTER)
    if error == "":
        raise ValidationError("error must not be empty")
    return Selection(
        queue=v.optional_name(body.get("queue"), "Queue"),
        partition=v.optional_name(body.get("partition"), "Partition"),
        consumer_group=v.optional_name(body.get("consumerGroup"), "Consumer group"),
        error=error,
        from_ts=start,
        to_ts=end,
        ids=_ids(body.get("ids")),
    )


def _ids(value: Any) -> tuple[tuple[str, str], ...] | None:
    """[{partitionId, transactionId}, ...]: the keys the other message routes use."""
    if value is None:
        return None
    if not isinstance(value, list) or not value or len(value) > MAX_IDS:
        raise ValidationError(
            f"ids must be a list of 1 to {MAX_IDS} {{partitionId, transactionId}} objects"
        )
    keys: list[tuple[str, str]] = []
    for index, item in enumerate(value):
        if not isinstance(item, dict) or set(item) != set(ID_FIELDS):
            raise ValidationError(
                f"ids[{index}] must be an object with exactly partitionId and transactionId"
            )
        pid = v.uuid_str(item["partitionId"], f"ids[{index}].partitionId")
        tid = item["transactionId"]
        if not isinstance(tid, str) or not 0 < len(tid) <= MAX_TRANSACTION_ID:
            raise ValidationError(
                f"ids[{index}].transactionId must be a string of 1 to {MAX_TRANSACTION_ID} "
                "characters"
            )
        assert pid is not None
        keys.append((pid, tid))
    return tuple(keys)


def _int(body: dict[str, Any], key: str, maximum: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ValidationError(f"{key} must be an integer between 1 and {maximum}, got {value!r}")
    return value


def _bounded_limit(limit: int | None, per_second: int | None) -> int:
    """The run's limit. Without one: DEFAULT_LIMIT, or what `perSecond` allows within
    MAX_RUN_SECONDS when that is fewer. An explicit limit beyond that is refused."""
    if per_second is None:
        return limit or DEFAULT_LIMIT
    most = per_second * MAX_RUN_SECONDS
    if limit is None:
        return min(DEFAULT_LIMIT, most)
    if limit > most:
        seconds = math.ceil(limit / per_second)
        raise ValidationError(
            f"limit {limit} at perSecond {per_second} would run {seconds} s, longer than the"
            f" {MAX_RUN_SECONDS} s one request may run: lower limit to {most} or raise "
            "perSecond (a rerun continues where a run stopped)"
        )
    return limit
