"""Queue operations as the HTTP layer sees them: the store call plus its side effects.

A push (or an ack that frees a partition) wakes the poll workers of this process at
once and tells every registered `WakeupSink` (HTTP/UDP peers) about it; other processes
and instances also hear of it through PostgreSQL NOTIFY, sent by the stored functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queen_threads.services.polling import PollingService
from queen_threads.store import QueueStore

WakeupSink = Callable[[dict[str, Any]], None]


class QueueService:
    def __init__(self, store: QueueStore, polling: PollingService) -> None:
        self.store = store
        self.polling = polling
        self.sinks: list[WakeupSink] = []

    def _announce(self, event: dict[str, Any]) -> None:
        self.polling.on_event(event, source="push")
        for sink in self.sinks:
            sink(event)

    def _announce_pushed(self, pairs: list[tuple[str, str]]) -> None:
        for queue, partition in dict.fromkeys(pairs):
            self._announce({"kind": "push", "queue": queue, "partition": partition})

    def push(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = self.store.push(items)
        self._announce_pushed(
            [
                (item["queue"], item["partition"])
                for item, result in zip(items, results, strict=False)
                if result.get("status") == "queued"
            ]
        )
        return results

    def ack(self, acks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = self.store.ack(acks)
        for ack, result in zip(acks, results, strict=False):
            if result.get("leaseReleased") and result.get("queueName"):
                self._announce(
                    {
                        "kind": "free",
                        "queue": result["queueName"],
                        "partition": result.get("partitionName"),
                        "consumerGroup": ack["consumerGroup"],
                    }
                )
        return results

    def transaction(self, operations: list[dict[str, Any]]) -> dict[str, Any]:
        result = self.store.transaction(operations)
        if result.get("success"):
            self._announce_pushed(
                [(i["queue"], i["partition"]) for op in operations for i in op.get("items") or ()]
            )
        return result

    def pop(self, request: dict[str, Any]) -> dict[str, Any]:
        return self.store.pop([request])[0]
