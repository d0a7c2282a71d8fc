"""Key/value and locks over the database: one stored-function call per request
(schema/functions/65_kv_*.sql, 67_locks.sql), values always as bind parameters."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from queen_threads.db import Statements

OUTCOMES = ("grant", "takeover", "already", "refusal")


class LockCounts:
    """This process's lock acquires by outcome (grant, takeover, already, refusal)."""

    def __init__(self) -> None:
        self._counts = dict.fromkeys(OUTCOMES, 0)
        self._lock = threading.Lock()

    def add(self, counts: dict[str, int]) -> None:
        with self._lock:
            for outcome, n in counts.items():
                if outcome in self._counts:
                    self._counts[outcome] += int(n)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class LockObserver(Protocol):
    """Hears the outcome counts of every locks call (kv/metrics.py counts them)."""

    def acquired(self, counts: dict[str, int]) -> None: ...


class KvStore:
    """The statements of `schema/queries/kv.sql`; its `observer` hears every locks call."""

    def __init__(self, db: Statements, observer: LockObserver | None = None) -> None:
        self.db = db
        self.lock_counts = LockCounts()
        self.observer = observer

    def batch(self, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """Validated operations in one transaction: {results} or, when a `required`
        precondition was lost, the rolled-back verdict {success: false, reason, ...}."""
        return dict(self.db.call("kv_batch", {"operations": operations}))

    def locks(self, operations: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Validated lock operations: one result each, in order."""
        answer = self.db.call("locks_apply", {"operations": operations})
        counts = answer.get("counts") or {}
        if counts:
            self.lock_counts.add(counts)
            if self.observer is not None:
                self.observer.acquired(counts)
        return list(answer["results"])

    def stats(self) -> dict[str, Any]:
        """Live keys, expired rows waiting for the sweeper, rows swept, live permits."""
        return dict(self.db.json("kv_stats"))
