"""The firer: one per server process, it turns due timers into messages on time.

It sleeps until the earliest due time it knows, and no longer than `max_sleep_s`:
- each fire call (`queen.timers_fire_v1`) answers when the next pending timer is due
  (`nextInMs`, relative, so no clock of this host is compared with the database's), or
  that it should look again at once (a full batch) or soon (due timers another
  transaction holds, which may roll back);
- a timer scheduled in this process moves it earlier at once (`wake_in`);
- a timer scheduled in another process or instance does too, through that process's
  announcement (timers/announcer.py, a NOTIFY on the wake-up channel).
A timer due in the past fires on the first cycle. Any number of processes fire at once:
the fire claims its timers with FOR UPDATE SKIP LOCKED, so each timer is delivered by
exactly one of them (schema/functions/98_timers_fire.sql).

A failed call (database away) is logged (a warning when its reason changes) and retried
after `max_sleep_s`. While `ready()` is false (schema not migrated yet, push maintenance
on) no timer fires; the firer looks again every `max_sleep_s`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from queen_threads.threads import SignalledThread

log = logging.getLogger("queen_threads.timers")

Fire = Callable[[int], dict[str, Any]]  # limit -> the fire's answer
Fired = Callable[[dict[str, Any]], None]  # what to do with an answer (wake-ups, metrics)
EARLY_S = 0.0005  # wake this much after the due time, not before: "not before" is the rule


class Firer:
    def __init__(
        self,
        fire: Fire,
        on_fired: Fired,
        *,
        batch: int,
        max_sleep_s: float,
        ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fire = fire
        self.on_fired = on_fired
        self.batch = batch
        self.max_sleep_s = max_sleep_s
        self.ready = ready
        self.clock = clock
        self._loop = SignalledThread("timers-firer", self._run)
        self._due = 0.0  # clock time of the next cycle; 0: at once (the first cycle)
        self.cycles = 0
        self.fired = 0
        self.duplicates = 0
        self.deferred = 0
        self.errors = 0
        self.last_error: str | None = None

    def wake_in(self, seconds: float) -> None:
        """A timer is due in `seconds` (<= 0: due now): cycle by then."""
        at = self.clock() + max(0.0, seconds) + EARLY_S
        with self._loop.cond:
            if at < self._due:
                self._due = at
                self._loop.cond.notify()

    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._loop.stop(timeout_s)

    def _wait(self) -> bool:
        """Sleep until the next cycle is due; False when stopping."""
        with self._loop.cond:
            while not self._loop.stopping:
                left = self._due - self.clock()
                if left <= 0:
                    # Until an answer says otherwise, the next cycle is a max sleep away.
                    self._due = self.clock() + self.max_sleep_s
                    return True
                self._loop.cond.wait(left)
            return False

    def _run(self) -> None:
        while self._wait():
            if not self.ready():
                continue
            self.cycle()

    def cycle(self) -> dict[str, Any] | None:
        """One fire call and what follows from its answer (None: it failed)."""
        self.cycles += 1
        try:
            answer = self.fire(self.batch)
        except Exception as exc:
            self._failed(f"fire failed (retried in {self.max_sleep_s:.1f} s): {exc}")
            return None
        if answer.get("error"):
            self._failed(f"a batch failed and its oldest timer waits: {answer['error']}")
        self.fired += int(answer.get("fired") or 0)
        self.duplicates += int(answer.get("duplicates") or 0)
        self.deferred += int(answer.get("deferred") or 0)
        try:
            self.on_fired(answer)
        except Exception:
            log.exception("timers: handling a fire's answer failed")
        for key, scale in (("nextInMs", 0.001), ("retryInMs", 0.001)):
            value = answer.get(key)
            if isinstance(value, int | float):
                self.wake_in(float(value) * scale)
        if answer.get("more"):
            self.wake_in(0.0)
        return answer

    def _failed(self, reason: str) -> None:
        self.errors += 1
        level = logging.DEBUG if reason == self.last_error else logging.WARNING
        self.last_error = reason
        log.log(level, "timers: %s", reason)

    def stats(self) -> dict[str, Any]:
        with self._loop.cond:
            next_in = max(0.0, self._due - self.clock())
        return {
            "cycles": self.cycles,
            "fired": self.fired,
            "duplicates": self.duplicates,
            "deferred": self.deferred,
            "errors": self.errors,
            "lastError": self.last_error,
            "nextCycleInMs": round(next_in * 1000, 1),
            "alive": self._loop.alive(),
        }
