"""A background thread that sleeps on a condition until it has work or is told to stop:
the start and stop of the timers' firer and announcer and of the wake notifier
(timers/firer.py, timers/announcer.py, wake/notifier.py).

Its owner keeps its own state under `cond`'s lock, loops in `run` waiting on `cond` while
`stopping` is false, and notifies `cond` when work comes. `stop()` sets `stopping`, wakes
the loop and joins it, for at most `timeout_s` (a loop inside a database call finishes
that call first; the thread is a daemon, so it never holds the process up).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class SignalledThread:
    def __init__(self, name: str, run: Callable[[], None]) -> None:
        self.name = name
        self.run = run
        self.cond = threading.Condition(threading.Lock())
        self.stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
