"""The timers room's database calls: one stored-function call (one round trip) each.

Payloads bound for an encrypted queue are sealed here before they are stored, as the
queue store seals a push's (`QueueStore.sealed`): the timer row holds what the message
will hold, and a peek shows it as stored, `encrypted: true`.
"""

from __future__ import annotations

from typing import Any

import orjson

from queen_threads.db import Statements
from queen_threads.queue.store import QueueStore


class TimerStore:
    def __init__(self, db: Statements, queues: QueueStore) -> None:
        self.db = db
        self.queue_store = queues

    def apply(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Schedule/reschedule/cancel (validated ops): results in input order."""
        answer = self.db.call("timers_apply", {"operations": self.sealed(ops)})
        return list(answer["results"])

    def sealed(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`ops` with the payloads of encrypted queues encrypted (copies)."""
        schedules = [op for op in ops if "payload" in op]
        encrypted = self.queue_store.encrypted_queues(schedules)
        if not encrypted:
            return ops
        cipher = self.queue_store.cipher
        assert cipher is not None
        return [
            {**op, "payload": cipher.encrypt(op["payload"]), "isEncrypted": True}
            if "payload" in op and op["queue"] in encrypted
            else op
            for op in ops
        ]

    def peek(self, queue: str, timer_key: str) -> dict[str, Any]:
        return dict(self.db.call("timers_peek", {"queue": queue, "timerKey": timer_key}))

    def page(self, queue: str, after: str | None, limit: int) -> dict[str, Any]:
        return dict(self.db.call("timers_list", {"queue": queue, "after": after, "limit": limit}))

    def fire(self, limit: int) -> dict[str, Any]:
        return dict(self.db.call("timers_fire", {"limit": limit}))

    def stats(self) -> dict[str, Any]:
        return dict(self.db.json("timers_stats"))

    def queues(self, limit: int) -> list[dict[str, Any]]:
        return list(self.db.json("timers_queues", (limit,)))

    def announce(self, event: dict[str, Any]) -> None:
        self.db.value("timers_announce", (orjson.dumps(event).decode(),))

    def prune_fires(self, hours: int, limit: int) -> int:
        return int(self.db.value("timers_prune_fires", (hours, limit)))
