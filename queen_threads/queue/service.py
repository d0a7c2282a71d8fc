"""Queue operations as the HTTP layer sees them: the store call plus its side effects.

A push (or an ack that frees a partition) wakes the poll workers of this process at
once and tells every registered `WakeupSink` (HTTP/UDP peers) about it; other processes
and instances also hear of it through PostgreSQL NOTIFY, sent by the stored functions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from queen_threads.queue.intention import PopRequest
from queen_threads.queue.polling import PollingService
from queen_threads.queue.push_batcher import PushBatcher
from queen_threads.queue.store import QueueStore

WakeupSink = Callable[[dict[str, Any]], None]
PushFn = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
# The failover buffer (queen_threads/buffer/): push(items, direct) tries `direct` and
# buffers the items when the database is unreachable or maintenance mode is on.
Failover = Callable[[list[dict[str, Any]], PushFn], list[dict[str, Any]]]
PushObserver = Callable[[list[dict[str, Any]], list[dict[str, Any]]], None]


class QueueService:
    def __init__(
        self,
        store: QueueStore,
        polling: PollingService,
        sinks: Sequence[WakeupSink] = (),
        failover: Failover | None = None,
        on_push_results: PushObserver | None = None,
    ) -> None:
        self.store = store
        self.polling = polling
        self.sinks = list(sinks)
        # On Citus (once known) a call carries one partition's requests: it is delegated.
        self.batcher = PushBatcher(store.push, across=lambda: not store.citus.known())
        self.failover = failover
        # Sees the results of every push of the HTTP path (metrics count `buffered` items).
        self.on_push_results = on_push_results

    def _announce(self, event: dict[str, Any]) -> None:
        self.polling.on_event(event, source="push")
        for sink in self.sinks:
            sink(event)

    def _announce_pushed(self, pairs: list[tuple[str, str]]) -> None:
        counts: dict[tuple[str, str], int] = {}
        for pair in pairs:
            counts[pair] = counts.get(pair, 0) + 1
        for (queue, partition), count in counts.items():
            self._announce({"kind": "push", "queue": queue, "partition": partition,
                            "count": count})  # fmt: skip

    def announce_pushed(self, pairs: list[tuple[str, str]]) -> None:
        """Messages landed in these (queue, partition)s by another path (buffer replay)."""
        self._announce_pushed(pairs)

    def announce_freed(self, queue: str, partition: str, group: str) -> None:
        """Another path gave a lease back (a streams SDK cycle): its long polls may pop."""
        self._announce({"kind": "free", "queue": queue, "partition": partition,
                        "consumerGroup": group})  # fmt: skip

    def push(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.failover is not None:
            results = self.failover(items, self._push_direct)
        else:
            results = self._push_direct(items)
        if self.on_push_results is not None:
            self.on_push_results(items, results)
        return results

    def _push_direct(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = self.batcher.push(items)
        queued = [
            (item["queue"], item["partition"])
            for item, result in zip(items, results, strict=False)
            if result.get("status") == "queued"
        ]
        self._announce_pushed(queued)
        return results

    def ack(self, acks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Acknowledge; a freed partition wakes its long polls at once, or, when a retry
        now waits on it (``retryDelayMs``), when that wait is over (docs/retries.md)."""
        results = self.store.ack(acks)
        for ack, result in zip(acks, results, strict=False):
            if result.get("leaseReleased") and result.get("queueName"):
                event = {
                    "kind": "free",
                    "queue": result["queueName"],
                    "partition": result.get("partitionName"),
                    "consumerGroup": ack["consumerGroup"],
                }
                if result.get("retryDelayMs"):
                    event["delayMs"] = result["retryDelayMs"]
                self._announce(event)
        return results

    def transaction(
        self,
        operations: list[dict[str, Any]],
        required_leases: list[str] | None = None,
        riders: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        result = self.store.transaction(operations, required_leases, riders)
        if result.get("success"):
            self._announce_pushed(
                [(i["queue"], i["partition"]) for op in operations for i in op.get("items") or ()]
            )
        return result

    def pop(self, request: PopRequest) -> dict[str, Any]:
        """One pop now (``wait=false``), with a lease of its own."""
        return self.store.pop([request.arguments(str(uuid.uuid4()))])[0]
