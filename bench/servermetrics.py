"""What the server counted during a window, per message: database calls by statement, poll
worker events and wake-ups, HTTP answers by status (its Prometheus text, read before and
after). A server without `/metrics/prometheus` (the original) gives nothing, silently."""

from __future__ import annotations

import re

from bench.httpclient import Connection, HttpError

PATH = "/metrics/prometheus"
SERIES = re.compile(
    r"^(queen_(?:db_query_duration_seconds_(?:count|sum)|poll_worker_events_total"
    r"|poll_worker_wakeups_total|http_requests_total))(\{[^}]*\})? ([0-9.eE+-]+)$"
)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
SHORT = {
    "queen_db_query_duration_seconds_count": "db_calls",
    "queen_db_query_duration_seconds_sum": "db_ms",
    "queen_poll_worker_events_total": "poll",
    "queen_poll_worker_wakeups_total": "wakeups",
    "queen_http_requests_total": "http",
}


def parse(text: str) -> dict[str, float]:
    """`kind:label` -> value, summed over the worker processes' series."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = SERIES.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match[2] or ""))
        label = labels.get("query") or labels.get("event") or labels.get("source")
        label = label or labels.get("code") or "-"
        key = f"{SHORT[match[1]]}:{label}"
        out[key] = out.get(key, 0.0) + float(match[3])
    return out


async def scrape(conn: Connection) -> dict[str, float] | None:
    """The server's counters now, or None when it has no such page."""
    try:
        response = await conn.request("GET", PATH)
    except (OSError, ValueError, HttpError):
        return None
    if response.status != 200:
        return None
    return parse(response.body.decode("utf-8", "replace"))


def per_message(
    before: dict[str, float] | None, after: dict[str, float] | None, messages: int
) -> dict[str, float]:
    """What grew between the two readings, per message (db_ms: milliseconds of wall time
    the server's calls of that statement took)."""
    if before is None or after is None or messages <= 0:
        return {}
    out = {}
    for key in sorted(after):
        grew = after[key] - before.get(key, 0.0)
        if grew <= 0:
            continue
        if key.startswith("db_ms:"):
            grew *= 1000
        out[key] = round(grew / messages, 4)
    return out
