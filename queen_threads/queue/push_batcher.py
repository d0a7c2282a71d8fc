"""Group commit for pushes: concurrent push requests of one process share a database call.

There is no timer: a lone request is sent at once. While `max_concurrent` calls are in
flight, requests that arrive queue up and go together in the next call (led by the oldest
of them), so under load many small pushes cost one commit, and a 201 still means
committed. Two calls in flight (the default) keep large pushes of several clients
running in parallel while small ones are still combined. The
items of one request always travel in one call, so each request stays atomic; if a
combined call fails for a reason other than the database being unavailable, each request
is retried alone so that one request's bad data cannot fail the others.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from queen_threads.errors import Unavailable

Items = list[dict[str, Any]]
PushFn = Callable[[Items], Items]


class _Ticket:
    __slots__ = ("error", "items", "lead", "results")

    def __init__(self, items: Items) -> None:
        self.items = items
        self.results: Items | None = None
        self.error: BaseException | None = None
        self.lead = False


class PushBatcher:
    """Combines the pushes of concurrent requests; `push()` blocks until committed."""

    def __init__(self, push_fn: PushFn, max_items: int = 5000, max_concurrent: int = 2) -> None:
        self._push_fn = push_fn
        self._max_items = max_items
        self._max_concurrent = max_concurrent
        self._pending: deque[_Ticket] = deque()
        self._leaders = 0
        self._cond = threading.Condition(threading.Lock())
        self.calls = 0
        self.requests = 0

    def push(self, items: Items) -> Items:
        ticket = _Ticket(items)
        with self._cond:
            self._pending.append(ticket)
            if self._leaders < self._max_concurrent:
                self._leaders += 1
                ticket.lead = True
            while not ticket.lead and ticket.results is None and ticket.error is None:
                self._cond.wait()
        if ticket.lead:
            self._lead(ticket)
        if ticket.error is not None:
            raise ticket.error
        assert ticket.results is not None
        return ticket.results

    def _take(self, own: _Ticket) -> list[_Ticket]:
        """The leader's own request plus the waiting ones after it that fit in one call."""
        self._pending.remove(own)
        batch, count = [own], len(own.items)
        for ticket in list(self._pending):
            if ticket.lead:
                continue
            if count + len(ticket.items) > self._max_items:
                break
            self._pending.remove(ticket)
            batch.append(ticket)
            count += len(ticket.items)
        return batch

    def _lead(self, own: _Ticket) -> None:
        with self._cond:
            batch = self._take(own)
        try:
            self._run(batch)
        finally:
            with self._cond:
                successor = next((t for t in self._pending if not t.lead), None)
                if successor is not None:
                    successor.lead = True
                else:
                    self._leaders -= 1
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
