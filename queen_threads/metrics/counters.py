"""This process's live numbers for the JSON `GET /metrics` (thread/greenlet safe).

Prometheus (definitions.py) has the server-wide view; these are totals, per-second rates
over the last minute and latency percentiles of the process that answers.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any


def latency_percentiles(values: Iterable[float]) -> dict[str, float]:
    """p50, p95 and p99 of `values` (milliseconds), 0 when there are none."""
    ordered = sorted(values)

    def pct(p: float) -> float:
        if not ordered:
            return 0.0
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2)

    return {"p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99)}


class EventRate:
    """A total and the events of the last minute (for a per-second rate)."""

    def __init__(self, window_s: float = 60.0) -> None:
        self.window_s = window_s
        self.total = 0
        self._recent: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        if n <= 0:
            return
        now = time.monotonic()
        with self._lock:
            self.total += n
            self._recent.append((now, n))
            self._trim(now)

    def _trim(self, now: float) -> None:
        while self._recent and now - self._recent[0][0] > self.window_s:
            self._recent.popleft()

    def snapshot(self) -> dict[str, float]:
        now = time.monotonic()
        with self._lock:
            self._trim(now)
            recent = sum(n for _, n in self._recent)
            total = self.total
        return {"total": total, "rate": round(recent / self.window_s, 2), "lastMinute": recent}


class ProcessCounters:
    """Messages and database calls of this process."""

    def __init__(self) -> None:
        self.pushed = EventRate()
        self.popped = EventRate()
        self.acked = EventRate()
        self.decryption_errors = EventRate()
        self.db_calls = EventRate()
        self.db_errors = 0
        self._db_ms: deque[float] = deque(maxlen=2048)
        self._lock = threading.Lock()

    def db_call(self, elapsed_s: float, failed: bool) -> None:
        self.db_calls.add(1)
        with self._lock:
            self._db_ms.append(elapsed_s * 1000)
            if failed:
                self.db_errors += 1

    def db_snapshot(self) -> dict[str, Any]:
        with self._lock:
            recent = list(self._db_ms)
            errors = self.db_errors
        return {
            **self.db_calls.snapshot(),
            "errors": errors,
            "latencyMs": latency_percentiles(recent),
        }

    def messages_snapshot(self) -> dict[str, Any]:
        pushed = self.pushed.snapshot()
        return {
            "total": pushed["total"],
            "rate": pushed["rate"],
            "pushed": pushed,
            "popped": self.popped.snapshot(),
            "acked": self.acked.snapshot(),
            "decryptionErrors": self.decryption_errors.snapshot(),
        }


class RequestStats:
    """HTTP requests: totals by status class, those in progress and a sliding window of
    response times."""

    def __init__(self, window: int = 2048) -> None:
        self._lock = threading.Lock()
        self.started_at = time.time()
        self.total = 0
        self.active = 0  # begun and not recorded yet (waiting long polls included)
        self.by_class: dict[str, int] = {}
        self._recent: deque[tuple[float, float]] = deque(maxlen=window)

    def begin(self) -> None:
        with self._lock:
            self.active += 1

    def record(self, status: int, elapsed_ms: float) -> None:
        with self._lock:
            self.total += 1
            self.active = max(0, self.active - 1)
            key = f"{status // 100}xx"
            self.by_class[key] = self.by_class.get(key, 0) + 1
            self._recent.append((time.monotonic(), elapsed_ms))

    def snapshot(self) -> dict[str, object]:
        now = time.monotonic()
        with self._lock:
            recent = list(self._recent)
            total = self.total
            by_class = dict(self.by_class)
        last_minute = [ms for t, ms in recent if now - t <= 60]
        return {
            "total": total,
            "byStatus": by_class,
            "rate": round(len(last_minute) / 60.0, 2),
            "latencyMs": latency_percentiles(last_minute),
        }
