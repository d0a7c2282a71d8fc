"""Timers as the HTTP layer sees them: the store calls plus what follows a commit.

A schedule that committed moves this process's firer earlier when the timer is due
sooner than it planned, and is announced to the other processes (announcer.py). A fire
that stored messages wakes the long polls waiting for them exactly as a push does
(`QueueService.announce_pushed`: this process's poll workers at once, the peers, and the
other processes through the wake notifier after the commit), and its messages are counted
as pushed (metrics, the analytics' pushed per minute).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from queen_threads.timers import body as timer_ops
from queen_threads.timers.announcer import KIND, Announcer
from queen_threads.timers.firer import Firer
from queen_threads.timers.store import TimerStore

Pairs = list[tuple[str, str]]
SCHEDULES = ("schedule", "reschedule")
QUEUES_SHOWN = 100  # queues with pending timers in stats(), the soonest first


class FireObserver(Protocol):
    """Hears the messages each fire stored, per queue (queue/metrics.py's QueueMetrics
    counts them as pushed)."""

    def stored_by_timers(self, counts: dict[str, int]) -> None: ...


class TimerService:
    def __init__(
        self,
        store: TimerStore,
        *,
        announce_pushed: Callable[[Pairs], None],
        saw_wake_epoch: Callable[[int], None],
        origin: str,
        batch: int,
        max_sleep_s: float,
        ready: Callable[[], bool],
        observer: FireObserver | None = None,
    ) -> None:
        self.store = store
        self.announce_pushed = announce_pushed
        self.saw_wake_epoch = saw_wake_epoch
        self.observer = observer
        self.firer = Firer(
            store.fire, self._fired, batch=batch, max_sleep_s=max_sleep_s, ready=ready
        )
        self.announcer = Announcer(store.announce, origin)
        self.origin = origin

    # -- requests ---------------------------------------------------------------------
    def apply(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Validated ops (ops.operations) -> index-aligned results."""
        sent = time.monotonic()
        results = self.store.apply(ops)
        self.scheduled(ops, sent)
        return results

    def cancel(self, queue: str, timer_key: str, txn: str | None) -> dict[str, Any]:
        op = {"op": "cancel", "queue": queue, "timerKey": timer_key, "txn": txn}
        return self.store.apply([op])[0]

    def peek(self, queue: str, timer_key: str) -> dict[str, Any]:
        found = self.store.peek(queue, timer_key)
        if found.get("found"):
            found["payload"] = timer_ops.encode_payload(found.get("payload"))
        return found

    def page(self, queue: str, after: str | None, limit: int) -> dict[str, Any]:
        return self.store.page(queue, after, limit)

    # -- what follows a commit ----------------------------------------------------------
    def scheduled(self, ops: list[dict[str, Any]], sent: float) -> None:
        """Timers were scheduled (committed) by a call sent at `sent` (time.monotonic()):
        the firers must be awake by the soonest. Its time is counted from the sending, not
        from the answer: the database's clock read it in between, so a firer may wake a
        round trip early (the fire then says how long is left), never a round trip late."""
        delays = [op["delayMs"] for op in ops if op.get("op") in SCHEDULES]
        if not delays:
            return
        soonest = min(delays) / 1000 - (time.monotonic() - sent)
        self.firer.wake_in(soonest)
        self.announcer.due_in(soonest)

    def on_wakeup(self, event: dict[str, Any]) -> bool:
        """A wake-up event from the LISTEN connection: True when it was a timer
        announcement (of another process) and has been handled."""
        if event.get("kind") != KIND:
            return False
        in_ms = event.get("inMs")
        if event.get("origin") != self.origin and isinstance(in_ms, int | float):
            self.firer.wake_in(float(in_ms) / 1000)
        return True

    def _fired(self, answer: dict[str, Any]) -> None:
        epoch = answer.get("epoch")
        if isinstance(epoch, int):
            self.saw_wake_epoch(epoch)
        pairs = [(str(q), str(p)) for q, p in answer.get("pairs") or ()]
        if pairs:
            self.announce_pushed(pairs)
        if answer.get("stored") and self.observer is not None:
            self.observer.stored_by_timers(dict(answer["stored"]))

    # -- lifecycle and numbers --------------------------------------------------------
    def start(self) -> None:
        self.firer.start()
        self.announcer.start()

    def stop(self) -> None:
        self.firer.stop()
        self.announcer.stop()

    def stats(self) -> dict[str, Any]:
        """This process's firer and announcer, and the database's timers (pending, the last
        hour's fires and their lateness, the queues with pending timers)."""
        try:
            database: dict[str, Any] = self.store.stats()
            database["queues"] = self.store.queues(QUEUES_SHOWN)
        except Exception as exc:  # /metrics must answer without the database
            database = {"error": str(exc)}
        return {
            "firer": self.firer.stats(),
            "announcements": self.announcer.stats(),
            "database": database,
        }
