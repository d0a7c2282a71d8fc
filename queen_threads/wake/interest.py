"""What this process's long polls wait for, told to the database so that other processes
send their wake-ups only where somebody waits (`queen.wake_interest`).

Before a poll worker pops for a long poll, `WakeInterest.cover` makes sure the database
has a row, not about to expire, for each queue (or namespace/task scope) the poll waits
for; it returns only after that row has committed. The other processes' notifiers check
for such rows after their push or ack has committed (`queen.wake_batch_v2`) and notify
only the events somebody else waits for. So a wake-up cannot be missed: if a notifier's
check ran before a row committed, the pop that follows the row starts after the
notifier's commit too, and finds its messages.

Rows last `TTL_S`. A background loop renews, every `TTL_S / 4`, the rows of every
selector that still has a waiting intention (the registries' `waiting_selectors`), and
`cover` renews a row that has less than half its time left, so a row of a waiting poll
never runs out unless the process stalls for longer than `TTL_S / 2`. Then a push in that
gap is found by the poll's next backoff pop instead of a wake-up, as when a wake-up is
lost to a crash. Rows of processes that ended without withdrawing expire and are deleted
an hour later. The notifier's `origin` tags the rows, so a process never notifies itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from queen_threads.polling import Clock, GroupSelector

log = logging.getLogger("queen_threads.wake")

TTL_S = 60.0
"""How long a row says its process waits, from the moment it was written."""

Key = tuple[str | None, ...]
Register = Callable[[dict[str, Any]], Any]  # {"origin", "ttlMs", "selectors"} -> the call
Withdraw = Callable[[str], Any]  # origin -> the call
Source = Callable[[], Iterable[GroupSelector]]


def key_of(selector: GroupSelector) -> Key:
    """A queue by name, or a namespace/task scope (None: any); the partition and the
    consumer group do not matter to whether a process wants to hear of a queue."""
    if selector.queue is not None:
        return ("queue", selector.queue)
    return ("scope", selector.namespace, selector.task)


def as_json(key: Key) -> dict[str, str | None]:
    if key[0] == "queue":
        return {"queue": key[1]}
    return {"namespace": key[1], "task": key[2]}


class WakeInterest:
    """The `Cover` of this process's poll stacks (polling/popper.py)."""

    def __init__(
        self,
        register: Register,
        withdraw: Withdraw,
        origin: str,
        *,
        ttl_s: float = TTL_S,
        clock: Clock = time.monotonic,
    ) -> None:
        self._register = register
        self._withdraw = withdraw
        self.origin = origin
        self.ttl_s = ttl_s
        self._clock = clock
        self._valid: dict[Key, float] = {}  # key -> the clock time its row lasts until
        self._lock = threading.Lock()
        self._sources: list[Source] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.calls = 0
        self.failed = 0

    def watch(self, source: Source) -> None:
        """Keep the selectors ``source()`` returns covered (a registry's waiting ones)."""
        self._sources.append(source)

    def cover(self, selectors: Iterable[GroupSelector]) -> None:
        """Return once every selector's row lasts at least another half TTL."""
        now = self._clock()
        keys = {key_of(selector) for selector in selectors}
        with self._lock:
            stale = [key for key in keys if self._valid.get(key, now) - now < self.ttl_s / 2]
        if not stale:
            return
        self.calls += 1
        try:
            self._register(
                {
                    "origin": self.origin,
                    "ttlMs": int(self.ttl_s * 1000),
                    "selectors": [as_json(key) for key in stale],
                }
            )
        except Exception:
            self.failed += 1
            raise
        until = now + self.ttl_s  # read before the call: the row lasts at least this long
        with self._lock:
            for key in stale:
                self._valid[key] = max(self._valid.get(key, until), until)

    def renew(self) -> None:
        """Cover every watched selector, and forget keys whose rows have run out."""
        now = self._clock()
        with self._lock:
            for key in [key for key, until in self._valid.items() if until <= now]:
                del self._valid[key]
        self.cover(selector for source in self._sources for selector in source())

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="wake-interest", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(self.ttl_s / 4):
            try:
                self.renew()
            except Exception as exc:
                log.warning("renewing this process's wake-up interest failed: %s", exc)

    def stop(self, timeout_s: float = 2.0) -> None:
        """End the renewals and delete this process's rows (best effort: rows left behind
        only cost other processes a NOTIFY or two until they expire)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        with self._lock:
            had_rows = bool(self._valid)
            self._valid.clear()
        if not had_rows:
            return
        try:
            self._withdraw(self.origin)
        except Exception as exc:
            log.warning("withdrawing this process's wake-up interest failed: %s", exc)

    def stats(self) -> dict[str, int]:
        with self._lock:
            keys = len(self._valid)
        return {"keys": keys, "calls": self.calls, "failed": self.failed}
