"""In-memory stand-ins for tests of the long-poll machinery (no database).

The manual clock is product code (`queen_threads.polling.clock.ManualClock`).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from queen_threads.polling.popper import PopResult
from queen_threads.queue.intention import GroupKey, PollIntention, PopRequest

__all__ = ["InMemoryPopper", "make_intention"]


def make_intention(
    request_id: str,
    *,
    worker_id: int = 0,
    created_at: float = 0.0,
    timeout_s: float = 30.0,
    **fields: Any,
) -> PollIntention:
    """A PollIntention with test defaults; ``deadline`` = ``created_at + timeout_s``;
    ``fields`` are the PopRequest's (queue, partition, consumer_group, batch, ...)."""
    deadline = fields.pop("deadline", created_at + timeout_s)
    return PollIntention(
        request_id=request_id,
        worker_id=worker_id,
        request=PopRequest(**fields),
        deadline=deadline,
        created_at=created_at,
    )


class InMemoryPopper:
    """A :class:`Popper` over message counts per grouping key.

    ``pop_group`` follows the real contract: one pop per intention in order, up to its
    batch, each with a fresh lease id, stopping after the first empty pop. Calls and
    releases are recorded; ``fail_with`` makes the next call raise; ``on_pop`` is called
    with the intentions of every call (after popping), e.g. to set an event. An empty pop
    of a group carries its ``due_in`` entry (seconds) and, for the keys in ``contended``,
    the contended flag.
    """

    def __init__(self, available: dict[GroupKey, int] | None = None) -> None:
        self.available: dict[GroupKey, int] = dict(available or {})
        self.due_in: dict[GroupKey, float] = {}
        self.contended: set[GroupKey] = set()
        self.calls: list[list[str]] = []
        self.released: list[str] = []
        self.fail_with: Exception | None = None
        self.on_pop: Callable[[Sequence[PollIntention]], None] | None = None
        self._leases = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, key: GroupKey, count: int) -> None:
        """Make ``count`` more messages available to group ``key``."""
        with self._lock:
            self.available[key] = self.available.get(key, 0) + count

    def pop_group(
        self, intentions: Sequence[PollIntention], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        with self._lock:
            self.calls.append([it.request_id for it in intentions])
            if self.fail_with is not None:
                error, self.fail_with = self.fail_with, None
                raise error
            results: list[PopResult] = []
            for intention in intentions:
                results.append(self._pop_one(intention))
                if not results[-1].has_messages:
                    break
        if self.on_pop is not None:
            self.on_pop(intentions)
        return results

    def pop_heads(
        self, intentions: Sequence[PollIntention], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        with self._lock:
            self.calls.append([it.request_id for it in intentions])
            if self.fail_with is not None:
                error, self.fail_with = self.fail_with, None
                raise error
            results = [self._pop_one(intention) for intention in intentions]
        if self.on_pop is not None:
            self.on_pop(intentions)
        return results

    def release(self, lease_ids: Sequence[str]) -> None:
        with self._lock:
            self.released.extend(lease_ids)

    def _pop_one(self, intention: PollIntention) -> PopResult:
        key = intention.grouping_key()
        count = min(intention.request.batch, self.available.get(key, 0))
        if count == 0:
            return PopResult(
                intention.request_id,
                204,
                None,
                due_in=self.due_in.get(key),
                contended=key in self.contended,
            )
        self.available[key] -= count
        body = json.dumps({"messages": [{"n": i} for i in range(count)]}).encode()
        lease = f"lease-{next(self._leases)}"
        return PopResult(intention.request_id, 200, body, (lease,), count)


class PartitionedPopper:
    """A :class:`Popper` over messages per partition of one queue, for the linger: a pop
    takes the partition whose oldest message has waited longest (the database's claim
    order), up to the intention's batch, and says which partition it took. Calls record
    the request ids and the partition each pop took (None: empty)."""

    def __init__(self) -> None:
        self.messages: dict[str, list[float]] = {}  # partition -> arrival times
        self.calls: list[list[str]] = []
        self.taken: list[str | None] = []
        self.released: list[str] = []
        self.on_pop: Callable[[Sequence[PollIntention]], None] | None = None
        self._leases = itertools.count(1)

    def add(self, partition: str, at: float, count: int = 1) -> None:
        self.messages.setdefault(partition, []).extend([at] * count)

    def pop_group(
        self, intentions: Sequence[PollIntention], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        self.calls.append([it.request_id for it in intentions])
        results: list[PopResult] = []
        for i, intention in enumerate(intentions):
            results.append(self._pop_one(intention, partitions[i] if i < len(partitions) else None))
            if not results[-1].has_messages:
                break
        if self.on_pop is not None:
            self.on_pop(intentions)
        return results

    def pop_heads(
        self, intentions: Sequence[PollIntention], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        self.calls.append([it.request_id for it in intentions])
        named = list(partitions) + [None] * (len(intentions) - len(partitions))
        results = [self._pop_one(it, p) for it, p in zip(intentions, named, strict=True)]
        if self.on_pop is not None:
            self.on_pop(intentions)
        return results

    def release(self, lease_ids: Sequence[str]) -> None:
        self.released.extend(lease_ids)

    def _pop_one(self, intention: PollIntention, named: str | None = None) -> PopResult:
        ready = [(times[0], p) for p, times in self.messages.items() if times]
        if named is not None:  # a pop of that partition only
            ready = [(at, p) for at, p in ready if p == named]
        if not ready:
            self.taken.append(None)
            return PopResult(intention.request_id, 204, None, partitions=(named,) if named else ())
        _, partition = min(ready)
        times = self.messages[partition]
        count = min(intention.request.batch, len(times))
        del times[:count]
        self.taken.append(partition)
        body = json.dumps({"messages": [{"n": i} for i in range(count)]}).encode()
        lease = f"lease-{next(self._leases)}"
        return PopResult(intention.request_id, 200, body, (lease,), count, partitions=(partition,))
