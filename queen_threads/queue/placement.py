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
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

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
