"""This process's analytics until the next flush: event counts per (queue, minute) and its
own figures per minute (thread/greenlet safe, no database).

`QueueMinutes` is fed by the measuring points (metered.py); `ProcessMinutes` by a sample
once a second (collector.py). Both hand their content over with `drain()` and take it back
with `restore()` when a flush failed, so a database outage delays counts, it does not lose
them (up to MAX_PENDING_MINUTES of them).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Clock = Callable[[], float]

# The kinds of events counted per queue and minute, with their key in the flush payload.
EVENTS = ("pushed", "popped", "acked", "failed", "dlq", "pollWaits")
# Ack statuses (queen._ack_items) and the event each counts as; the others count nothing.
ACK_EVENTS = {
    "completed": "acked",
    "failed_retry": "failed",
    "retry": "failed",
    "failed_dlq": "dlq",
}
# Kept at most this many minutes while flushes fail (the oldest are dropped beyond it).
MAX_PENDING_MINUTES = 24 * 60


def minute_of(epoch_s: float) -> int:
    """The start of the UTC minute holding `epoch_s`, as epoch seconds."""
    return int(epoch_s // 60) * 60


def iso_minute(minute: int) -> str:
    return datetime.fromtimestamp(minute, UTC).strftime("%Y-%m-%dT%H:%M:00Z")


class QueueMinutes:
    """Counts of pushes, deliveries, acks, failures, dead letters and long-poll waits per
    (queue, minute) since the last drain."""

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock
        self._counts: dict[tuple[str, int], dict[str, int]] = {}
        self._lock = threading.Lock()
        self.version = 0  # moves on with every change: whether a snapshot is out of date

    def add(self, event: str, queues: Iterable[str]) -> None:
        """One `event` per queue name in `queues` (a name may repeat), at the current
        minute. Empty names (an item without a queue) are not counted."""
        self.add_counts(event, collections.Counter(queues))

    def add_counts(self, event: str, counts: Mapping[str, int]) -> None:
        """`counts[queue]` times `event` per queue, at the current minute (as `add`)."""
        if event not in EVENTS:
            raise ValueError(f"unknown analytics event {event!r}")
        minute = minute_of(self.clock())
        with self._lock:
            for queue, n in counts.items():
                if queue and n:
                    row = self._counts.setdefault((queue, minute), {})
                    row[event] = row.get(event, 0) + n
                    self.version += 1

    def add_acks(self, pairs: Iterable[tuple[str, str]]) -> None:
        """(queue, ack status) pairs: each status counts as its ACK_EVENTS event."""
        by_event: dict[str, list[str]] = {}
        for queue, status in pairs:
            event = ACK_EVENTS.get(status)
            if event is not None:
                by_event.setdefault(event, []).append(queue)
        for event, queues in by_event.items():
            self.add(event, queues)

    def drain(self) -> list[dict[str, Any]]:
        """Everything counted so far, as flush rows ({queue, minute, <event>: n}); the
        accumulator starts empty again."""
        with self._lock:
            counts, self._counts = self._counts, {}
            self.version += 1
        return _rows(counts)

    def snapshot(self) -> tuple[int, list[dict[str, Any]]]:
        """The version and a copy of everything counted since the last drain, as flush
        rows (the live rows of the charts, collector.py)."""
        with self._lock:
            return self.version, _rows(self._counts)

    def restore(self, rows: list[dict[str, Any]]) -> None:
        """Put drained rows back (their flush failed), merged with what came since."""
        with self._lock:
            self.version += 1
            for row in rows:
                key = (str(row["queue"]), _minute_epoch(row["minute"]))
                target = self._counts.setdefault(key, {})
                for event in EVENTS:
                    if row.get(event):
                        target[event] = target.get(event, 0) + int(row[event])
            _trim(self._counts, lambda key: key[1])


@dataclass
class ProcessSample:
    """What one sample of this process reads (collector.py takes it)."""

    cpu_seconds: float  # CPU time of the process so far (user + system)
    rss_bytes: int
    http_requests: int  # requests answered so far
    http_active: int
    pool_in_use: int
    pool_size: int
    pool_waiting: int
    long_polls: int


ADDED = ("cpuSeconds", "wallSeconds", "httpRequests")
LARGEST = ("rssBytes", "httpActive", "poolInUse", "poolSize", "poolWaiting", "longPolls")


class ProcessMinutes:
    """This process's figures per minute: CPU and wall seconds and requests between
    samples (added), and the largest of each level sampled."""

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock
        self._rows: dict[int, dict[str, float]] = {}
        self._last: tuple[float, ProcessSample] | None = None
        self._lock = threading.Lock()

    def sample(self, s: ProcessSample) -> None:
        now = self.clock()
        with self._lock:
            last, self._last = self._last, (now, s)
            row = self._rows.setdefault(minute_of(now), {})
            if last is not None:
                then, previous = last
                _add(row, "wallSeconds", max(0.0, now - then))
                _add(row, "cpuSeconds", max(0.0, s.cpu_seconds - previous.cpu_seconds))
                _add(row, "httpRequests", max(0, s.http_requests - previous.http_requests))
            levels = {
                "rssBytes": s.rss_bytes,
                "httpActive": s.http_active,
                "poolInUse": s.pool_in_use,
                "poolSize": s.pool_size,
                "poolWaiting": s.pool_waiting,
                "longPolls": s.long_polls,
            }
            for key, value in levels.items():
                row[key] = max(row.get(key, 0), value)

    def drain(self) -> list[dict[str, Any]]:
        with self._lock:
            rows, self._rows = self._rows, {}
        return [{"minute": iso_minute(m), **row} for m, row in sorted(rows.items())]

    def restore(self, rows: list[dict[str, Any]]) -> None:
        with self._lock:
            for row in rows:
                target = self._rows.setdefault(_minute_epoch(row["minute"]), {})
                for key in ADDED:
                    _add(target, key, row.get(key, 0))
                for key in LARGEST:
                    target[key] = max(target.get(key, 0), row.get(key, 0))
            _trim(self._rows, lambda minute: minute)


def _rows(counts: Mapping[tuple[str, int], Mapping[str, int]]) -> list[dict[str, Any]]:
    return [
        {"queue": queue, "minute": iso_minute(minute), **row}
        for (queue, minute), row in sorted(counts.items())
    ]


def _add(row: dict[str, float], key: str, value: float) -> None:
    row[key] = row.get(key, 0) + value


def _minute_epoch(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def _trim(rows: dict[Any, Any], minute: Callable[[Any], int]) -> None:
    """Drop the oldest minutes beyond MAX_PENDING_MINUTES."""
    minutes = sorted({minute(key) for key in rows})
    if len(minutes) <= MAX_PENDING_MINUTES:
        return
    cutoff = minutes[-MAX_PENDING_MINUTES]
    for key in [k for k in rows if minute(k) < cutoff]:
        del rows[key]
