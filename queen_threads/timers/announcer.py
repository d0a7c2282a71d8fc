"""Tells the firers of the other processes and instances when a timer scheduled here is due.

The firer of this process learns of its own schedules directly; the others hear of them
through a NOTIFY on the wake-up channel (`{"kind": "timers", "inMs", "origin"}`, read by
every process's LISTEN connection, wake/listener.py), so whichever process is alive at
the due time fires it on time. Sent after the commit, from a background thread, and only
for a timer due sooner than every one announced before that is still ahead: the other
firers wake for the earliest and learn the rest from the fire's own answer (`nextInMs`),
so a burst of schedules costs a handful of NOTIFYs, not one each. A timer due within
LOCAL_ONLY_S is not announced. A failed send is logged and counted; the other firers
still find the timer at their next cycle.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from queen_threads.threads import SignalledThread

log = logging.getLogger("queen_threads.timers")

KIND = "timers"
# A timer due sooner than this is left to this process's own firer, which fires it within
# milliseconds: waking every firer everywhere for it would only make them race for it.
LOCAL_ONLY_S = 0.1
Send = Callable[[dict[str, Any]], None]


class Announcer:
    def __init__(
        self, send: Send, origin: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.send = send
        self.origin = origin
        self.clock = clock
        self._loop = SignalledThread("timers-announcer", self._run)
        self._announced = -1.0  # clock time of the earliest timer announced (past: none)
        self._pending: float | None = None  # clock time of the timer to announce next
        self.sent = 0
        self.failed = 0

    def due_in(self, seconds: float) -> None:
        """A timer scheduled here is due in `seconds`."""
        if seconds < LOCAL_ONLY_S:
            return
        at = self.clock() + seconds
        with self._loop.cond:
            ahead = self._announced if self._announced > self.clock() else None
            if ahead is not None and at >= ahead:
                return
            if self._pending is None or at < self._pending:
                self._pending = at
                self._loop.cond.notify()

    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._loop.stop(timeout_s)

    def _take(self) -> float | None:
        with self._loop.cond:
            while self._pending is None and not self._loop.stopping:
                self._loop.cond.wait()
            at = self._pending
            if self._loop.stopping or at is None:
                return None
            self._pending = None
            self._announced = at
            return at

    def _run(self) -> None:
        while (at := self._take()) is not None:
            in_ms = max(0.0, (at - self.clock()) * 1000)
            try:
                self.send({"kind": KIND, "inMs": round(in_ms, 3), "origin": self.origin})
                self.sent += 1
            except Exception as exc:
                self.failed += 1
                log.warning("timers: announcement to other processes not sent: %s", exc)

    def stats(self) -> dict[str, int]:
        return {"sent": self.sent, "failed": self.failed}
