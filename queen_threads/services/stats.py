"""In-process request counters for /metrics (thread/greenlet safe)."""

from __future__ import annotations

import threading
import time
from collections import deque


class RequestStats:
    """Totals and a sliding window of recent response times."""

    def __init__(self, window: int = 2048) -> None:
        self._lock = threading.Lock()
        self.started_at = time.time()
        self.total = 0
        self.by_class: dict[str, int] = {}
        self._recent: deque[tuple[float, float]] = deque(maxlen=window)

    def record(self, status: int, elapsed_ms: float) -> None:
        with self._lock:
            self.total += 1
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
        ordered = sorted(last_minute)

        def pct(p: float) -> float:
            if not ordered:
                return 0.0
            return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2)

        return {
            "total": total,
            "byStatus": by_class,
            "rate": round(len(last_minute) / 60.0, 2),
            "latencyMs": {"p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99)},
        }
