"""Query and path parameters of the administration routes: paging, ISO times, strict
booleans, names and message keys; every one of them fails with a 400."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypedDict

import falcon

from queen_threads import validation as v
from queen_threads.errors import ValidationError
from queen_threads.http.request import int_param, str_param

MAX_LIMIT = 1000
CLAMPED_HEADER = "Queen-Clamped-Parameters"
MAX_OFFSET = 2**31 - 1
MAX_TRANSACTION_ID = 1024
FALSE_VALUES = ("false", "0")
# The query parameters the parsers below read, for the rows of the routes that use them.
PAGE = frozenset({"limit", "offset"})
TIME_RANGE = frozenset({"from", "to"})
CHART = TIME_RANGE | {"interval"}
MESSAGE_FILTERS = PAGE | TIME_RANGE | {"queue", "partition"}
TRUE_VALUES = ("true", "1")


def page(req: falcon.Request, resp: falcon.Response, default_limit: int) -> tuple[int, int]:
    """(limit, offset) from the query string: limit >= 1, offset >= 0. The original server
    answers any limit; one request here reads at most MAX_LIMIT rows, so a larger limit is
    clamped and the answer says so: `Queen-Clamped-Parameters: limit=1000` (the limit used,
    also in the answer's `pagination`)."""
    limit = int_param(req, "limit", default_limit, 1)
    if limit > MAX_LIMIT:
        limit = MAX_LIMIT
        resp.set_header(CLAMPED_HEADER, f"limit={MAX_LIMIT}")
    return limit, int_param(req, "offset", 0, 0, MAX_OFFSET)


def iso_time(value: Any, what: str) -> datetime:
    """An ISO-8601 time as an aware datetime (UTC when the text has no offset)."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be an ISO-8601 timestamp")
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1] in "zZ" else text)
    except ValueError:
        raise ValidationError(f"{what} must be an ISO-8601 timestamp, got {value!r}") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def iso_z(moment: datetime) -> str:
    """UTC ISO-8601 with milliseconds and a literal Z, as the other admin timestamps."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def time_range(req: falcon.Request) -> tuple[datetime | None, datetime | None]:
    """The optional `from` / `to` query parameters; `from` must not be after `to`."""
    raw_from, raw_to = str_param(req, "from"), str_param(req, "to")
    start = iso_time(raw_from, "from") if raw_from is not None else None
    end = iso_time(raw_to, "to") if raw_to is not None else None
    if start is not None and end is not None and start > end:
        raise ValidationError("from must not be after to")
    return start, end


def strict_bool(req: falcon.Request, name: str, default: bool) -> bool:
    raw = req.get_param(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value not in TRUE_VALUES + FALSE_VALUES:
        raise ValidationError(f"{name} must be true or false, got {raw!r}")
    return value in TRUE_VALUES


def name_param(req: falcon.Request, name: str, what: str) -> str | None:
    return v.optional_name(str_param(req, name), what)


def scope_filters(req: falcon.Request) -> dict[str, str | None]:
    """The optional `queue`, `namespace` and `task` filters of the listing and chart routes."""
    return {
        "queue": name_param(req, "queue", "Queue"),
        "namespace": name_param(req, "namespace", "Namespace"),
        "task": name_param(req, "task", "Task"),
    }


class MessageFilters(TypedDict):
    """What every listing of messages takes (GET /messages, GET /dlq): the keyword
    arguments of their stores' reads."""

    queue: str | None
    partition: str | None
    from_ts: datetime | None
    to_ts: datetime | None
    limit: int
    offset: int


def message_filters(
    req: falcon.Request, resp: falcon.Response, default_limit: int
) -> MessageFilters:
    """The query parameters MESSAGE_FILTERS names: page, time range, queue, partition."""
    limit, offset = page(req, resp, default_limit)
    start, end = time_range(req)
    return MessageFilters(
        queue=name_param(req, "queue", "Queue"),
        partition=name_param(req, "partition", "Partition"),
        from_ts=start, to_ts=end, limit=limit, offset=offset,
    )  # fmt: skip


def message_key(partition_id: str, transaction_id: str) -> tuple[str, str]:
    """Validated (partitionId, transactionId) from a path."""
    pid = v.uuid_str(partition_id, "partitionId")
    assert pid is not None
    if not transaction_id or len(transaction_id) > MAX_TRANSACTION_ID:
        raise ValidationError(f"transactionId must be 1 to {MAX_TRANSACTION_ID} characters")
    return pid, transaction_id
