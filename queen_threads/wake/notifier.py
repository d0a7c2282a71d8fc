"""Wake-ups for the other processes, sent after the commit instead of inside it.

A NOTIFY inside a push or ack transaction holds PostgreSQL's notify-queue lock from the
commit's start until its WAL flush is done, so all notifying commits of a database line
up one flush after another: measured on this kind of machine, 8 connections committing
one-row inserts reached about 2,200 commits/s with a NOTIFY in each and 5,000-6,000
without. So the server's push and ack statements tell their stored functions not to
notify (`queen.server_wakes`, see `queen._wake` in schema/functions/10_helpers.sql); the
server wakes its own poll workers directly and hands each event to a `WakeNotifier`, one
per process, which sends whatever piled up in one notify-only transaction
(`queen.wake_batch_v2`: no flush wait, the lock held for a moment). While one such call
is in flight new events collect (duplicates merge), so under load one call carries many.
Only the events some other process waits for are sent (wake/interest.py); the filter
(wake/targets.py) decides that from a copy of the other processes' interest, so when
nobody else waits there is no database call at all; and those only sibling processes of
this instance wait for go to them over their Unix sockets (the relay, wake/siblings.py),
so the database is called only for what processes out of their reach wait for.

An event sent here carries this process's `origin`; its own listener drops it (the poll
workers here were woken when the event was made). If the call fails (database gone), the
events are dropped and counted: a wake-up is a hint, and long polls of other processes
still find the messages on their next backoff pop, as after a process crash between a
commit and its wake-up.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Hashable
from typing import Any

from queen_threads.threads import SignalledThread

log = logging.getLogger("queen_threads.wake")

Event = dict[str, Any]
Send = Callable[[dict[str, Any]], Any]  # {"origin", "events"} -> the database call
Wanted = Callable[[list[Event]], list[Event]]  # the events another process waits for
Relay = Callable[[list[Event]], list[Event]]  # delivers what it can; returns the rest

MAX_PENDING = 10_000  # distinct events waiting; beyond it new ones are dropped (counted)
# Under load (a flush within BUSY_S of the one before) the loop lets events pile up this
# long before it takes them: one datagram, one NOTIFY carry many, and the siblings wake
# once for them. A lone event (an idle instance) goes at once.
BUSY_S = 0.010
COALESCE_S = 0.002


def _key(event: Event) -> Hashable:
    """Events that wake the same long polls are one: kind, queue, partition, group, delay."""
    return (
        event.get("kind"),
        event.get("queue"),
        event.get("partition"),
        event.get("consumerGroup"),
        event.get("delayMs"),
    )


class WakeNotifier:
    """A wake-up sink (QueueService.sinks): coalesces events and NOTIFYs them in the
    background, one database call at a time."""

    def __init__(
        self,
        send: Send,
        origin: str | None = None,
        wanted: Wanted | None = None,
        relay: Relay | None = None,
    ) -> None:
        self.send = send
        self.origin = origin or uuid.uuid4().hex
        self.wanted = wanted
        self.relay = relay
        self._pending: dict[Hashable, Event] = {}
        self._loop = SignalledThread("wake-notifier", self._run)
        self.calls = 0
        self.sent = 0
        self.unwanted = 0  # events no other process waited for (not sent)
        self.failed = 0
        self.dropped = 0

    def __call__(self, event: Event) -> None:
        with self._loop.cond:
            if len(self._pending) >= MAX_PENDING:
                self.dropped += 1
                return
            key = _key(event)
            earlier = self._pending.get(key)
            if earlier is not None and "count" in earlier and "count" in event:
                event = {**event, "count": earlier["count"] + event["count"]}  # linger's hint
            first = not self._pending
            self._pending[key] = event
            if first:  # the loop waits only on an empty pile (a notify costs a lock check)
                self._loop.cond.notify()

    def is_own(self, event: Event) -> bool:
        """Sent by this process (its poll workers were woken already)."""
        return event.get("origin") == self.origin

    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Send what is pending, then end the loop."""
        self._loop.stop(timeout_s)

    def _take(self) -> list[Event] | None:
        with self._loop.cond:
            while not self._pending and not self._loop.stopping:
                self._loop.cond.wait()
            if not self._pending:
                return None
            events = list(self._pending.values())
            self._pending.clear()
            return events

    def _run(self) -> None:
        last = -BUSY_S
        while (events := self._take()) is not None:
            self.flush(events)
            now = time.monotonic()
            if now - last < BUSY_S and not self._loop.stopping:
                time.sleep(COALESCE_S)  # busy: the next take carries what came meanwhile
            last = now

    def flush(self, events: list[Event]) -> None:
        """One call for the `events` another process waits for and the relay did not
        deliver (none: no call); a failure is logged and counted, never raised."""
        wanted = events
        try:
            if self.wanted is not None:
                wanted = self.wanted(events)
            self.unwanted += len(events) - len(wanted)
            if self.relay is not None and wanted:
                wanted = self.relay(wanted)
            if not wanted:
                return
            self.calls += 1
            notified = self.send({"origin": self.origin, "events": wanted})
            sent = notified if isinstance(notified, int) else len(wanted)
            self.sent += sent
            self.unwanted += len(wanted) - sent
        except Exception as exc:
            self.failed += len(wanted)
            log.warning("wake-ups for other processes not sent (%s): %s", len(wanted), exc)

    def stats(self) -> dict[str, int]:
        with self._loop.cond:
            pending = len(self._pending)
        return {"calls": self.calls, "sent": self.sent, "unwanted": self.unwanted,
                "failed": self.failed, "dropped": self.dropped, "pending": pending}  # fmt: skip
