"""Where waiting ephemeral pops wait, and what opens their gates.

A pop with `wait=true` that found nothing waits on its queue's gate (one `threading.Event`
per queue and generation, cooperative under gevent). A push or an ack that handed messages
back in this process opens the gate at once. For pushes in other processes and instances,
one watcher thread per process reads, every `interval_s` and only while some pop waits, a
version per waited-for queue (messages pushed + handed back) and the earliest lease that
ran out (`queen.ephemeral_watch_v1`): one small query per process per interval whatever
the number of waiters, so a message pushed anywhere reaches a waiting pop within about
`interval_s` (50 ms), and a lease that runs out is redelivered within the same.

The waiter takes the gate before it pops: a push of this process between its empty pop
and its wait has already opened that gate. And it waits with the version its pop saw, so
a push elsewhere that the watcher reads after that pop opens the gate even when it is the
watcher's first look at the queue. No wake-up falls in between.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("queen_threads.ephemeral")

Watch = Callable[[list[str]], dict[str, list[Any]]]
MAX_REMEMBERED = 10_000  # queues whose last expired lease is remembered


class Gates:
    def __init__(self, watch: Watch, interval_s: float = 0.05) -> None:
        self._watch = watch
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._gates: dict[str, threading.Event] = {}
        self._waiting: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self._expiry_opened: dict[str, int] = {}
        self._someone_waits = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.opened = 0
        self.watch_errors = 0

    def gate(self, queue: str) -> threading.Event:
        """The queue's current gate: take it before popping, wait on it after."""
        with self._lock:
            return self._gates.setdefault(queue, threading.Event())

    def open(self, queue: str) -> None:
        """Wake every pop waiting on `queue` in this process."""
        with self._lock:
            gate = self._gates.pop(queue, None)
        if gate is not None:
            self.opened += 1
            gate.set()

    def wait(self, queue: str, gate: threading.Event, version: int, timeout_s: float) -> bool:
        """Wait until `gate` opens or `timeout_s` passes; True when it opened. `version`
        is the queue's version the waiter's pop saw."""
        self._enter(queue, version)
        try:
            return gate.wait(max(timeout_s, 0.0))
        finally:
            self._leave(queue)

    def _enter(self, queue: str, version: int) -> None:
        with self._lock:
            self._waiting[queue] = self._waiting.get(queue, 0) + 1
            self._seen[queue] = min(self._seen.get(queue, version), version)
            self._someone_waits.set()
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="ephemeral-gates", daemon=True
                )
                self._thread.start()

    def _leave(self, queue: str) -> None:
        with self._lock:
            left = self._waiting.get(queue, 1) - 1
            if left > 0:
                self._waiting[queue] = left
            else:
                self._waiting.pop(queue, None)
                self._seen.pop(queue, None)
            if not self._waiting:
                self._someone_waits.clear()

    def waiting(self) -> int:
        with self._lock:
            return sum(self._waiting.values())

    def stop(self) -> None:
        self._stop.set()
        self._someone_waits.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._someone_waits.wait()
            if self._stop.wait(self.interval_s):
                return
            try:
                self.check()
            except Exception as exc:  # the database is gone: waiters time out as usual
                self.watch_errors += 1
                log.debug("ephemeral watch failed: %s", exc)

    def check(self) -> None:
        """One look at the database for the queues some pop waits on."""
        with self._lock:
            queues = sorted(self._waiting)
        if not queues:
            return
        for queue, (version, expired_at) in self._watch(queues).items():
            changed = False
            with self._lock:
                if queue not in self._waiting:
                    continue
                if version != self._seen.get(queue, version):
                    changed = True
                self._seen[queue] = version
                # A lease ran out: open once per expiry, not on every look while another
                # group's expired lease sits there (remembered after the waiters left: a
                # pop redelivers what expired before it waits).
                if len(self._expiry_opened) > MAX_REMEMBERED:
                    self._expiry_opened.clear()
                if expired_at is not None and self._expiry_opened.get(queue) != expired_at:
                    self._expiry_opened[queue] = expired_at
                    changed = True
            if changed:
                self.open(queue)
