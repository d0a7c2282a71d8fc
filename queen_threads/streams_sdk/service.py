"""The streaming SDK's server side over the database: one stored-function call per route
(schema/functions/97b_streams_sdk.sql), values as bind parameters. A cycle's sink items are
sealed like any push (encrypted queues), and after its commit the long polls of this
process that wait on the sink, or on a source partition the cycle gave back, are woken
(other processes hear the NOTIFY the stored functions send at commit)."""

from __future__ import annotations

from typing import Any, Protocol

from queen_threads.db import Database
from queen_threads.errors import Conflict, NotFound, QueenError
from queen_threads.queue.store import QueueStore

REFUSALS: dict[str, type[QueenError]] = {"not_found": NotFound, "conflict": Conflict}


class Announcer(Protocol):
    """What wakes this process's long polls (QueueService)."""

    def announce_pushed(self, pairs: list[tuple[str, str]]) -> None: ...

    def announce_freed(self, queue: str, partition: str, group: str) -> None: ...


def _decided(result: dict[str, Any]) -> dict[str, Any]:
    """The function's answer, or its refusal raised as the project's error (4xx)."""
    if result.get("success") is False:
        raise REFUSALS.get(str(result.get("code")), Conflict)(str(result.get("error")))
    return result


class CycleObserver(Protocol):
    """Hears each cycle's outcome, "committed" or "refused" (streams_sdk/metrics.py)."""

    def cycled(self, outcome: str) -> None: ...


class StreamsSdk:
    """Register queries, commit cycles, read state; list and delete queries; its
    `observer` hears every cycle."""

    def __init__(
        self,
        db: Database,
        queues: QueueStore,
        announcer: Announcer,
        observer: CycleObserver | None = None,
    ) -> None:
        self.db = db
        self.queues = queues
        self.announcer = announcer
        self.observer = observer

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        return _decided(dict(self.db.call("sdk_register", body)))

    def cycle(self, body: dict[str, Any]) -> dict[str, Any]:
        items = body["pushItems"]
        sent = {**body, "pushItems": self.queues.seal(items)} if items else body
        try:
            result = _decided(dict(self.db.call("sdk_cycle", sent)))
        except Conflict:
            if self.observer is not None:
                self.observer.cycled("refused")
            raise
        if self.observer is not None:
            self.observer.cycled("committed")
        pushed = [
            (item["queue"], item["partition"])
            for item, res in zip(items, result.get("push_results") or (), strict=False)
            if res.get("status") == "queued"
        ]
        if pushed:
            self.announcer.announce_pushed(list(dict.fromkeys(pushed)))
        released = result.pop("released", None)
        if released:
            group = body["consumerGroup"]
            self.announcer.announce_freed(released["queue"], released["partition"], group)
        return result

    def state(self, body: dict[str, Any]) -> dict[str, Any]:
        return _decided(dict(self.db.call("sdk_state_get", body)))

    def queries(self) -> list[dict[str, Any]]:
        """Every registered query with its state size and the lag of its consumer group."""
        return list(self.db.json("sdk_query_list"))

    def delete(self, name: str) -> bool:
        """Drop a query and all its state (its consumer group's cursors stay)."""
        return self.db.execute("sdk_query_delete", {"name": name}) > 0
