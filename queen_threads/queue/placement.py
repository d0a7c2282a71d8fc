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

import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
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
    """(queue, group) for a pop of one whole queue that one node's shards can serve
    (`NodeAnchors`): no partition, namespace or task named, one partition wanted, no
    autopilot or conflation (those read the whole queue)."""
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


class NodeAnchors:
    """On Citus: one partition id per node that holds shard groups
    (`queen.citus_node_anchors_v1`): a pop of a whole queue is sent to one node after the
    other by them (`queen.pop_queue_on_node_v1` serves it from that node's shards, in one
    round trip). Read from the database at first use and again every `ttl_s` (shards that
    moved only make two anchors lead to one node until then: every call still runs where its
    anchor's shard is). The node each (queue, group)'s next pop starts at turns round, so
    the pops of a queue spread over the nodes."""

    def __init__(
        self, load: Callable[[], list[str]], ttl_s: float = 30.0, capacity: int = 4096
    ) -> None:
        self._load = load
        self._ttl_s = ttl_s
        self._capacity = capacity
        self._anchors: list[str] = []
        self._until = 0.0
        self._turns: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def order(self, key: tuple[str, str]) -> list[str]:
        """The anchors, starting at the node this key's pop goes to first."""
        anchors = self._current()
        if not anchors:
            return []
        with self._lock:
            turn = self._turns.pop(key, random.randrange(len(anchors)))
            self._turns[key] = turn + 1
            while len(self._turns) > self._capacity:
                self._turns.popitem(last=False)
        start = turn % len(anchors)
        return anchors[start:] + anchors[:start]

    def _current(self) -> list[str]:
        now = time.monotonic()
        if now >= self._until:
            anchors = [a for a in self._load() if partition_id(a) is not None]
            with self._lock:
                self._anchors, self._until = anchors, now + self._ttl_s
        return self._anchors


def merge_empty(first: dict[str, Any] | None, answer: dict[str, Any]) -> dict[str, Any]:
    """Two nodes' empty answers to one pop as one: the earlier due time (a long poll's),
    contended when either was."""
    if first is None:
        return dict(answer)
    dues = [d for d in (first.get("dueInMs"), answer.get("dueInMs")) if d is not None]
    merged = dict(first)
    if "dueInMs" in first or "dueInMs" in answer:
        merged["dueInMs"] = min(dues) if dues else None
    if "contended" in first or "contended" in answer:
        merged["contended"] = bool(first.get("contended")) or bool(answer.get("contended"))
    return merged


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
