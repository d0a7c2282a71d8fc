"""Wake-ups that are due later: a failed ack that scheduled a retry frees its partition only
when the retry's wait is over (docs/retries.md).

Without them a long poll that registered during the wait would find nothing, back off
(100, 200, 400 ... 2000 ms) and see the message up to a backoff interval late; with them
its group is woken when the wait ends. One thread per process sleeps until the earliest
due wake-up; `schedule` never blocks. At most `capacity` wake-ups wait: beyond that one is
dropped and counted, which costs latency (the group's own backoff finds the message), never
a message.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .clock import Clock

log = logging.getLogger("queen_threads.polling")

Fire = Callable[[dict[str, Any]], None]


class DelayedWakeups:
    """Calls ``fire(event)`` for each scheduled event once its delay has passed."""

    def __init__(
        self, fire: Fire, *, capacity: int = 100_000, clock: Clock = time.monotonic
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._fire = fire
        self._capacity = capacity
        self._clock = clock
        self._heap: list[tuple[float, int, dict[str, Any]]] = []
        self._order = itertools.count()  # ties keep scheduling order; events never compared
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.scheduled = 0
        self.fired = 0
        self.dropped = 0

    def schedule(self, delay_s: float, event: dict[str, Any]) -> bool:
        """Fire ``event`` in ``delay_s`` seconds; False (counted) when full or stopped."""
        with self._cond:
            if self._stopping or len(self._heap) >= self._capacity:
                self.dropped += 1
                return False
            due = self._clock() + max(0.0, delay_s)
            earliest = not self._heap or due < self._heap[0][0]
            heapq.heappush(self._heap, (due, next(self._order), event))
            self.scheduled += 1
            if earliest:
                self._cond.notify()
        return True

    def pending(self) -> int:
        with self._cond:
            return len(self._heap)

    def due(self) -> list[dict[str, Any]]:
        """Take the events whose time has come (the loop fires them; tests call it directly)."""
        now = self._clock()
        out: list[dict[str, Any]] = []
        with self._cond:
            while self._heap and self._heap[0][0] <= now:
                out.append(heapq.heappop(self._heap)[2])
        return out

    def run_once(self) -> int:
        """Fire what is due; how many were fired."""
        events = self.due()
        for event in events:
            self.fired += 1
            try:
                self._fire(event)
            except Exception:  # one wake-up's failure must not stop the others
                log.exception("delayed wake-up failed: %r", event)
        return len(events)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("delayed wake-ups already started")
        self._thread = threading.Thread(target=self._run, name="queen-delayed-wake", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> bool:
        """Drop what waits (the groups' own backoff covers it) and end the thread."""
        with self._cond:
            self._stopping = True
            self._heap.clear()
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def stats(self) -> dict[str, int]:
        return {
            "pending": self.pending(),
            "scheduled": self.scheduled,
            "fired": self.fired,
            "dropped": self.dropped,
        }

    def _run(self) -> None:
        while True:
            self.run_once()
            with self._cond:  # the wait is computed and entered under the lock: no lost notify
                if self._stopping:
                    return
                if not self._heap:
                    self._cond.wait()
                else:
                    wait = self._heap[0][0] - self._clock()
                    if wait > 0:
                        self._cond.wait(wait)
