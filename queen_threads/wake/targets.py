"""Which wake-up events some other process waits for, decided without a database call
while nothing changed (the notifier's filter, wake/notifier.py).

A process keeps a copy of the other processes' live `queen.wake_interest` rows
(`wake_interest_read_v1`: the queues they wait for, whether any waits for a
namespace/task scope, and the epoch the copy is of). Every server push and ack returns
the epoch as of its own transaction (`queen._wake_epoch`, under the shared lock that a
change of interest takes exclusively), and the store keeps the newest it saw. Before the
notifier decides about events, the copy must be at least as new as that: so a long poll
that registered before a push committed is in the copy, and one that registered after it
pops after its commit (migrations/0010_wake_interest.sql). The copy is read again when a
row in it runs out, since renewals do not move the epoch.

The copy can match queues by name only; a queue's namespace and task are the database's.
While some other process waits for a namespace/task scope, every event goes to
`queen.wake_batch_v2`, which matches scopes itself.

The copy also says which processes wait (`wake_interest_read_v2`): the sibling relay
(wake/siblings.py) hands an event that only sibling processes of this instance wait for
to them directly, without the database.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from queen_threads.polling import Clock

Event = dict[str, Any]
Read = Callable[[str], dict[str, Any]]  # origin -> {epoch, queues, scopes, ttlMs}
NOBODY: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Copy:
    epoch: int
    queues: Mapping[str, frozenset[str]]  # queue -> the other processes waiting for it
    scopes: frozenset[str]  # the other processes waiting for a namespace/task scope
    valid_until: float  # clock time the first of its rows runs out (inf: no rows)

    def waiting(self, queue: str | None) -> frozenset[str]:
        """The other processes waiting for `queue` by name."""
        return self.queues.get(queue, NOBODY) if queue is not None else NOBODY


class WakeTargets:
    """The notifier's filter: ``wanted(events)`` keeps those another process waits for."""

    def __init__(
        self, read: Read, origin: str, epoch: Callable[[], int], clock: Clock = time.monotonic
    ) -> None:
        self._read = read
        self.origin = origin
        self._epoch = epoch
        self._clock = clock
        self._copy: Copy | None = None
        self._lock = threading.Lock()
        self.reads = 0

    def wanted(self, events: list[Event]) -> list[Event]:
        """The events some other process may wait for; may read the interest rows (raises
        if the database cannot be read)."""
        copy = self.current()
        if copy.scopes:
            return events
        return [event for event in events if event.get("queue") in copy.queues]

    def current(self) -> Copy:
        """The copy, read again first if a push or ack saw a newer epoch or a row ran out."""
        with self._lock:
            needed = self._epoch()
            copy = self._copy
            if copy is not None and copy.epoch >= needed and self._clock() < copy.valid_until:
                return copy
            started = self._clock()
            data = self._read(self.origin)
            ttl_ms = data.get("ttlMs")
            queues = data.get("queues") or {}
            copy = Copy(
                int(data["epoch"]),
                {queue: frozenset(origins) for queue, origins in queues.items()},
                frozenset(data.get("scopes") or ()),
                math.inf if ttl_ms is None else started + max(0.0, float(ttl_ms)) / 1000,
            )
            self._copy = copy
            self.reads += 1
            return copy
