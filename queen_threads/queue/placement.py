"""Which partition a pop, an ack or a lease renewal concerns, when it concerns one.

Such an operation goes to its partition's own entry point (`queen.pop_partition_v1`,
`ack_partition_v1`, `renew_partition_v1`), which takes the partition id first: on Citus
those are delegated by it to the worker that holds the partition, in one round trip
(schema/citus/40_delegate.sql); on PostgreSQL they are the same statements as the general
ones. A pop names its partition by queue and partition name, a renewal only by its lease:
their ids are learnt from what the pops of this process returned (partition ids never
change; a partition deleted and created again under its name gets a new one, which the next
pop that delivers from it brings, and meanwhile the old id only routes the call, never
decides what it does). An ack names its partition itself.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from queen_threads.queue.body import DEFAULT_PARTITION

# Enough for every partition a busy process pops from and every lease it holds at once;
# the oldest entries go first (a miss only costs the general call).
CAPACITY = 65536


class _Recent:
    """A bounded map, least recently set entries dropped first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Any, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> str | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: Any, value: str) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)


def partition_id(text: Any) -> str | None:
    """`text` when it is a partition id (a UUID), else None."""
    if not isinstance(text, str):
        return None
    try:
        uuid.UUID(text)
    except ValueError:
        return None
    return text


class PartitionRoutes:
    """The partition of a pop request and of a lease, as far as this process knows it."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._partitions = _Recent(capacity)  # (queue, partition) -> partition id
        self._leases = _Recent(capacity)  # lease id -> the one partition it is held on

    def of_pop(self, request: dict[str, Any]) -> str | None:
        queue, partition = request.get("queue"), request.get("partition")
        if queue is None or partition is None:
            return None
        return self._partitions.get((queue, partition))

    def of_lease(self, lease_id: str) -> str | None:
        return self._leases.get(lease_id)

    def learn(self, requests: Sequence[dict[str, Any]], results: Iterable[dict[str, Any]]) -> None:
        """What pops answered: the partition a named partition's pop delivered from, and the
        one partition of each lease that holds one."""
        for request, result in zip(requests, results, strict=False):
            messages = result.get("messages") or ()
            pids = {m.get("partitionId") for m in messages}
            if len(pids) != 1:
                continue
            pid = pids.pop()
            if not isinstance(pid, str):
                continue
            if request.get("queue") is not None and request.get("partition") is not None:
                self._partitions.put((request["queue"], request["partition"]), pid)
            lease = result.get("leaseId")
            if lease:
                self._leases.put(lease, pid)


def ack_partition(acks: Sequence[dict[str, Any]]) -> str | None:
    """The partition every item of an ack names, when they name one."""
    pids = {a.get("partitionId") for a in acks}
    return partition_id(pids.pop()) if len(pids) == 1 else None


QUEUE_MODE = "__QUEUE_MODE__"


def candidate_key(request: dict[str, Any]) -> tuple[str, str] | None:
    """(queue, group) for a pop of one whole queue that a candidate partition can serve:
    no partition, namespace or task named, one partition wanted, no autopilot or conflation
    (those read the whole queue)."""
    queue = request.get("queue")
    if not isinstance(queue, str) or not queue:
        return None
    if request.get("partition") or request.get("namespace") or request.get("task"):
        return None
    if request.get("autopilotBatch") or request.get("autopilotPartitions"):
        return None
    if request.get("conflation") or (request.get("partitions") or 1) != 1:
        return None
    group = request.get("consumerGroup") or QUEUE_MODE
    return (queue, group) if isinstance(group, str) else None


class ReadyCandidates:
    """On Citus, the ready partitions a pop of a whole queue read and did not take (its
    answer's `candidates`, in claim order), kept briefly per (queue, group): the next pops of
    that queue try them one by one through the partition's entry point (one round trip, on
    the partition's worker) before they read the queue's ready index again (a statement on
    every shard). Each partition is tried once; a partition that has become ready since waits
    at most until the list is used up or `ttl_s` has passed."""

    def __init__(self, ttl_s: float = 1.0, capacity: int = 4096) -> None:
        self._ttl_s = ttl_s
        self._capacity = capacity
        self._lists: OrderedDict[tuple[str, str], tuple[float, list[str]]] = OrderedDict()
        self._lock = threading.Lock()

    def offer(self, key: tuple[str, str], pids: Iterable[Any]) -> None:
        fresh = [p for p in pids if partition_id(p) is not None]
        with self._lock:
            if not fresh:
                self._lists.pop(key, None)
                return
            self._lists[key] = (time.monotonic() + self._ttl_s, fresh)
            self._lists.move_to_end(key)
            while len(self._lists) > self._capacity:
                self._lists.popitem(last=False)

    def take(self, key: tuple[str, str]) -> str | None:
        with self._lock:
            entry = self._lists.get(key)
            if entry is None:
                return None
            until, pids = entry
            if time.monotonic() >= until or not pids:
                del self._lists[key]
                return None
            return pids.pop(0)


class PartitionIds:
    """The ids of the partitions this process pushed to, by (queue, partition) name, as
    push answers gave them (an id never changes while its partition exists). A push whose
    items all name one known partition goes to `queen.push_partition_v1` (on Citus: one
    round trip, on the node that holds the partition). When that function declines (the
    partition is gone, or its queue is capped, which only the general push can check), the
    name is forgotten and not tried again for `pause_s`."""

    def __init__(self, limit: int = 100_000, pause_s: float = 30.0) -> None:
        self._ids: dict[tuple[str, str], str] = {}
        self._paused: dict[tuple[str, str], float] = {}
        self._limit = limit
        self._pause_s = pause_s

    def get(self, key: tuple[str, str]) -> str | None:
        return self._ids.get(key)

    def learn(self, key: tuple[str, str], partition_id: str) -> None:
        until = self._paused.get(key)
        if until is not None:
            if time.monotonic() < until:
                return
            self._paused.pop(key, None)
        if len(self._ids) >= self._limit:
            self._ids.clear()
        self._ids[key] = partition_id

    def paused(self, key: tuple[str, str]) -> bool:
        until = self._paused.get(key)
        return until is not None and time.monotonic() < until

    def declined(self, key: tuple[str, str]) -> None:
        self._ids.pop(key, None)
        if len(self._paused) >= self._limit:
            self._paused.clear()
        self._paused[key] = time.monotonic() + self._pause_s


def one_partition(items: Sequence[dict[str, Any]]) -> tuple[str, str] | None:
    """The (queue, partition) every item names, or None when they name several."""
    if not items:
        return None
    first = items[0]
    queue = first.get("queue")
    partition = first.get("partition") or DEFAULT_PARTITION
    if not isinstance(queue, str) or not isinstance(partition, str):
        return None
    for item in items:
        if item.get("queue") != queue or (item.get("partition") or DEFAULT_PARTITION) != partition:
            return None
    return queue, partition
