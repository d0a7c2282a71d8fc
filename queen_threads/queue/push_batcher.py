"""Group commit for pushes: concurrent push requests of one process share a database call.

There is no timer: a lone request is sent at once. Requests that arrive while a call for
one of their partitions is in flight queue up and go together in the next call (led by
the oldest of them), so under load many small pushes cost one commit, and a 201 still
means committed.

Calls never overlap on a partition. The database serialises pushes to one partition
anyway (a push holds the partition's row lock until its commit, which keeps
(created_at, id) in commit order); a second call for a busy partition would only hold a
pool connection while it waits for the lock, and would carry fewer requests. Waiting
here instead lets the next call carry everything that arrived meanwhile. Calls for
disjoint partitions run side by side, up to `max_concurrent` at once. A request waits
behind earlier requests that share a partition with it (first come, first served per
partition), so a request to many partitions cannot be starved by small ones.

With `across` false, a call carries only requests for the partitions of the request that
leads it: on Citus a push of one partition is one delegated call on the node that holds
it, while a call over several partitions is the general push, a two-phase commit over the
nodes they live on (it cost the coordinator 1.6 ms per single push under load against
about 0.2 ms for a delegated call, `scripts/bench --scenarios z`).

The items of one request always travel in one call, so each request stays atomic; if a
combined call fails for a reason other than the database being unavailable, each request
is retried alone so that one request's bad data cannot fail the others.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from queen_threads.errors import Unavailable

Items = list[dict[str, Any]]
PushFn = Callable[[Items], Items]
KeyFn = Callable[[dict[str, Any]], Hashable]


def partition_key(item: dict[str, Any]) -> Hashable:
    """What the database serialises pushes on: the (queue, partition) pair, as a tuple."""
    return (item.get("queue"), item.get("partition"))


class _Ticket:
    __slots__ = ("error", "items", "keys", "lead", "results")

    def __init__(self, items: Items, keys: frozenset[Hashable]) -> None:
        self.items = items
        self.keys = keys
        self.results: Items | None = None
        self.error: BaseException | None = None
        self.lead = False


class PushBatcher:
    """Combines the pushes of concurrent requests; `push()` blocks until committed."""

    def __init__(
        self,
        push_fn: PushFn,
        max_items: int = 5000,
        max_concurrent: int = 2,
        key_of: KeyFn = partition_key,
        across: Callable[[], bool] = lambda: True,
    ) -> None:
        self._push_fn = push_fn
        self._max_items = max_items
        self._max_concurrent = max_concurrent
        self._key_of = key_of
        self._across = across  # may requests for other partitions share a call
        self._pending: deque[_Ticket] = deque()
        self._busy: set[Hashable] = set()  # partitions of the calls in flight
        self._leaders = 0
        self._waiters = 0  # requests waiting on the condition (nobody to notify: no notify)
        self._cond = threading.Condition(threading.Lock())
        self.calls = 0
        self.requests = 0

    def push(self, items: Items) -> Items:
        ticket = _Ticket(items, frozenset(self._key_of(item) for item in items))
        with self._cond:
            self._pending.append(ticket)
            self._promote()
            while not ticket.lead and ticket.results is None and ticket.error is None:
                self._waiters += 1
                try:
                    self._cond.wait()
                finally:
                    self._waiters -= 1
        if ticket.lead:
            self._lead(ticket)
        if ticket.error is not None:
            raise ticket.error
        assert ticket.results is not None
        return ticket.results

    def _promote(self) -> None:
        """Make waiting requests leaders while calls may start: the oldest ones whose
        partitions are free and not wanted by an older waiting request. Lock held."""
        blocked = set(self._busy)
        for ticket in self._pending:
            if self._leaders >= self._max_concurrent:
                return
            if not ticket.lead and blocked.isdisjoint(ticket.keys):
                ticket.lead = True
                self._leaders += 1
                self._notify()
            blocked |= ticket.keys

    def _take(self, own: _Ticket) -> list[_Ticket]:
        """The leader's own request plus the waiting ones after it that fit in one call and
        whose partitions no other call holds (or an older request waits for). Lock held."""
        self._pending.remove(own)
        batch, count = [own], len(own.items)
        blocked = set(self._busy)
        across = self._across()
        for ticket in list(self._pending):
            if (
                ticket.lead
                or not blocked.isdisjoint(ticket.keys)
                or count + len(ticket.items) > self._max_items
                or not (across or ticket.keys <= own.keys)
            ):
                blocked |= ticket.keys
                continue
            self._pending.remove(ticket)
            batch.append(ticket)
            count += len(ticket.items)
        self._busy.update(*(t.keys for t in batch))
        return batch

    def _lead(self, own: _Ticket) -> None:
        with self._cond:
            batch = self._take(own)
        try:
            self._run(batch)
        finally:
            with self._cond:
                self._busy.difference_update(*(t.keys for t in batch))
                self._leaders -= 1
                self._promote()
                self._notify()

    def _notify(self) -> None:
        """Wake the waiting requests to look at their tickets (lock held)."""
        if self._waiters:
            self._cond.notify_all()

    def _run(self, batch: list[_Ticket]) -> None:
        self.calls += 1
        self.requests += len(batch)
        combined = [item for ticket in batch for item in ticket.items]
        try:
            results = self._push_fn(combined)
        except Unavailable as exc:
            for ticket in batch:
                ticket.error = exc
            return
        except Exception as exc:
            if len(batch) == 1:
                batch[0].error = exc
                return
            for ticket in batch:
                self._run_alone(ticket)
            return
        offset = 0
        for ticket in batch:
            part = results[offset : offset + len(ticket.items)]
            for index, result in enumerate(part):
                result["index"] = index
            ticket.results = part
            offset += len(ticket.items)

    def _run_alone(self, ticket: _Ticket) -> None:
        try:
            ticket.results = self._push_fn(ticket.items)
        except Exception as exc:
            ticket.error = exc

    def stats(self) -> dict[str, int]:
        return {"calls": self.calls, "requests": self.requests, "waiting": len(self._pending)}
