"""The ephemeral room's only caller of the database: one stored-function call per request
(schema/functions/99_ephemeral.sql)."""

from __future__ import annotations

from typing import Any

from queen_threads.db import Database


class EphemeralStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.db.call("ephemeral_configure", body))

    def reset(self, queue: str) -> dict[str, Any]:
        return dict(self.db.call("ephemeral_reset", {"queue": queue}))

    def delete(self, queue: str) -> dict[str, Any]:
        return dict(self.db.call("ephemeral_delete", {"queue": queue}))

    def push(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.db.call("ephemeral_push", body))

    def pop(self, args: dict[str, Any]) -> dict[str, Any]:
        return dict(self.db.call("ephemeral_pop", args))

    def ack(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.db.call("ephemeral_ack", body))

    def queues(self) -> dict[str, Any]:
        return dict(self.db.json("ephemeral_queues"))

    def depth(self, queue: str) -> dict[str, Any] | None:
        answer = self.db.json("ephemeral_depth", {"queue": queue})
        return dict(answer) if answer is not None else None

    def watch(self, queues: list[str]) -> dict[str, list[Any]]:
        """{queue: [version, ms until the next lease runs out | None]}."""
        return dict(self.db.json("ephemeral_watch", {"queues": queues}))

    def totals(self) -> dict[str, Any]:
        return dict(self.db.json("ephemeral_totals"))
