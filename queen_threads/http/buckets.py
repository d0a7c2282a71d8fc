"""The time window of a chart route: `from`/`to` (ISO-8601, default the last hour) and the
bucket size `interval` (docs/api-admin.md, "Analytics"); every mistake is a 400."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import falcon

from queen_threads.errors import ValidationError
from queen_threads.http.params import iso_z, time_range
from queen_threads.http.request import str_param

DEFAULT_SPAN = timedelta(hours=1)
MAX_SPAN = timedelta(days=366)
AUTO_POINTS = 500  # `auto` takes the smallest interval giving at most this many points
MAX_POINTS = 7 * 24 * 60  # an explicit interval may give up to 7 days of minutes

# The intervals a chart may ask for, smallest first, in seconds.
INTERVALS = {
    "1m": 60,
    "5m": 300,
    "15m": 900,
    "30m": 1800,
    "1h": 3600,
    "3h": 3 * 3600,
    "6h": 6 * 3600,
    "12h": 12 * 3600,
    "1d": 86400,
}
ALIASES = {"minute": "1m", "hour": "1h", "day": "1d"}


@dataclass(frozen=True)
class Window:
    """[start, end) cut into buckets of `step_s` seconds (aligned on the Unix epoch)."""

    start: datetime
    end: datetime
    interval: str
    step_s: int

    @property
    def first_bucket(self) -> datetime:
        """The start of the bucket holding `start` (as queen._bucket computes it)."""
        epoch = self.start.timestamp() // self.step_s * self.step_s
        return datetime.fromtimestamp(epoch, UTC)

    def params(self) -> dict[str, Any]:
        """The bind parameters of the chart statements: they read whole buckets, from the
        one holding `start`."""
        return {"from_ts": self.first_bucket, "to_ts": self.end, "step_s": self.step_s}

    def frame(self) -> dict[str, Any]:
        """The head of every chart answer."""
        return {
            "from": iso_z(self.start),
            "to": iso_z(self.end),
            "interval": self.interval,
            "intervalSeconds": self.step_s,
        }


def points(start: datetime, end: datetime, step_s: int) -> int:
    """How many buckets of `step_s` seconds [start, end) touches."""
    first = start.timestamp() // step_s * step_s
    return max(0, math.ceil((end.timestamp() - first) / step_s))


def choose_interval(start: datetime, end: datetime, asked: str | None) -> tuple[str, int]:
    """(name, seconds) of the bucket: the one asked for, or the smallest giving at most
    AUTO_POINTS points."""
    if asked is None or asked == "auto":
        for name, step in INTERVALS.items():
            if points(start, end, step) <= AUTO_POINTS:
                return name, step
        return "1d", INTERVALS["1d"]
    name = ALIASES.get(asked, asked)
    if name not in INTERVALS:
        choices = ", ".join([*INTERVALS, *ALIASES, "auto"])
        raise ValidationError(f"interval must be one of {choices}, got {asked!r}")
    step = INTERVALS[name]
    if points(start, end, step) > MAX_POINTS:
        raise ValidationError(
            f"interval {asked} gives more than {MAX_POINTS} points over this range: "
            "take a larger interval or a shorter range"
        )
    return name, step


def default_range(req: falcon.Request, now: datetime | None = None) -> tuple[datetime, datetime]:
    """[from, to) of the request: `to` defaults to now (or `from` when that is later),
    `from` to an hour before `to`; at most 366 days."""
    start, end = time_range(req)
    current = now or datetime.now(UTC)
    if end is None:
        end = current if start is None else max(current, start)
    if start is None:
        start = end - DEFAULT_SPAN
    if end - start > MAX_SPAN:
        raise ValidationError("the time range from..to must not exceed 366 days")
    return start, end


def window(req: falcon.Request, now: datetime | None = None) -> Window:
    """The chart window of the request: its range and bucket size."""
    start, end = default_range(req, now)
    name, step = choose_interval(start, end, str_param(req, "interval"))
    return Window(start, end, name, step)
