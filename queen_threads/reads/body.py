"""The bodies of the two read routes, checked before they reach the stored functions."""

from __future__ import annotations

import re
from typing import Any

from queen_threads import validation as v
from queen_threads.errors import ValidationError

MAX_ENTRIES = 1024
"""Partitions one fetch may name (the client asks for at most 1000 per call)."""
MAX_BYTES = 8 * 1024 * 1024
"""The most payload one entry, and one call, reads; a larger maxBytes is read as this."""
CHANGED_PAGE = 1000
"""Partitions per discovery page: the default and the ceiling."""
_CURSOR = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z/[0-9a-f-]{36}$")

FETCH_FIELDS = ("entries", "maxBytes")  # the top-level fields each body may carry
CHANGED_FIELDS = ("entries",)


def _entries(body: dict[str, Any], most: int) -> list[Any]:
    entries = body.get("entries")
    if not isinstance(entries, list) or not entries:
        raise ValidationError("entries must be a non-empty array")
    if len(entries) > most:
        raise ValidationError(f"entries: at most {most} per call, got {len(entries)}")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValidationError(f"entries[{i}] must be an object")
    return entries


def _int(value: Any, what: str, default: int, minimum: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValidationError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def fetch_body(body: dict[str, Any]) -> dict[str, Any]:
    """{entries: [{queue, partition, offset, maxBytes}], maxBytes}, with defaults filled."""
    entries = []
    for i, entry in enumerate(_entries(body, MAX_ENTRIES)):
        entries.append({
            "queue": v.name(entry.get("queue"), f"entries[{i}].queue"),
            "partition": v.name(entry.get("partition"), f"entries[{i}].partition"),
            "offset": _int(entry.get("offset"), f"entries[{i}].offset", 0, 0),
            "maxBytes": min(_int(entry.get("maxBytes"), f"entries[{i}].maxBytes", MAX_BYTES, 1),
                            MAX_BYTES),
        })  # fmt: skip
    limit = min(_int(body.get("maxBytes"), "maxBytes", MAX_BYTES, 1), MAX_BYTES)
    return {"entries": entries, "maxBytes": limit}


def changed_body(body: dict[str, Any]) -> dict[str, Any]:
    """{entries: [{queue, since?, after?, limit}]}, with the page size filled in."""
    entries = []
    for i, entry in enumerate(_entries(body, MAX_ENTRIES)):
        what = f"entries[{i}]"
        checked: dict[str, Any] = {"queue": v.name(entry.get("queue"), f"{what}.queue")}
        if entry.get("since") is not None:
            checked["since"] = v.timestamp(entry["since"], f"{what}.since")
        after = entry.get("after")
        if after is not None:
            if not isinstance(after, str) or not _CURSOR.match(after):
                raise ValidationError(f"{what}.after must be the `next` of a previous page")
            checked["after"] = after
        limit = _int(entry.get("limit"), f"{what}.limit", CHANGED_PAGE, 1)
        if limit > CHANGED_PAGE:
            raise ValidationError(f"{what}.limit must be at most {CHANGED_PAGE}, got {limit}")
        checked["limit"] = limit
        entries.append(checked)
    return {"entries": entries}
