"""Queen's SQL API as a test calls it: one application connection (psycopg2, not the
server's pool), each call one statement; `commit()`/`rollback()` end the caller's
transaction (docs/sql.md)."""

from __future__ import annotations

import json
import select
from typing import Any

import psycopg2
import psycopg2.extensions

Conn = psycopg2.extensions.connection


class SqlFace:
    """An application's session on the database, in a transaction until commit()."""

    def __init__(self, dsn: str, *, autocommit: bool = False, **connect: Any) -> None:
        self.conn = psycopg2.connect(dsn, **connect)
        self.conn.autocommit = autocommit

    def one(self, sql: str, *args: Any) -> Any:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            row = cur.fetchone() if cur.description else None
            return None if row is None else row[0]

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def call(self, fn: str, payload: Any) -> Any:
        """A batch-layer function: jsonb in, jsonb out."""
        return self.one(f"SELECT queen.{fn}(%s::jsonb)", json.dumps(payload))

    def produce_one(self, queue: str, payload: Any, partition: str = "Default",
                    transaction_id: str | None = None) -> int:  # fmt: skip
        return int(self.one("SELECT queen.produce_one(%s, %s::jsonb, %s, %s)", queue,
                            json.dumps(payload), partition, transaction_id))  # fmt: skip

    def consume_one(self, queue: str, group: str = "__QUEUE_MODE__", batch: int = 1,
                    **named: Any) -> list[dict[str, Any]]:  # fmt: skip
        """consume_one's rows as dicts (named arguments by name: partition, timeout_seconds,
        auto_commit, subscription_mode)."""
        extra = "".join(f", {name} => %s" for name in named)
        with self.conn.cursor() as cur:
            cur.execute(
                f"SELECT partition_id::text, id, transaction_id, payload, created_at, lease_id"
                f" FROM queen.consume_one(%s, %s, %s{extra})",
                (queue, group, batch, *named.values()),
            )
            keys = ("partition_id", "id", "transaction_id", "payload", "created_at", "lease_id")
            return [dict(zip(keys, row, strict=True)) for row in cur.fetchall()]

    def commit_one(self, row: dict[str, Any], group: str = "__QUEUE_MODE__",
                   status: str = "completed", error: str | None = None) -> bool:  # fmt: skip
        return bool(self.one("SELECT queen.commit_one(%s, %s::uuid, %s, %s, %s, %s)",
                             row["transaction_id"], row["partition_id"], row["lease_id"],
                             group, status, error))  # fmt: skip

    def commit(self) -> None:
        self.conn.commit()

    def rollback(self) -> None:
        self.conn.rollback()

    def close(self) -> None:
        self.conn.close()


class Listener:
    """A LISTEN on the server's wake-up channel (or any other), to see what was NOTIFYed."""

    def __init__(self, dsn: str, channel: str = "queen_wakeup") -> None:
        self.conn = psycopg2.connect(dsn)
        self.conn.autocommit = True
        with self.conn.cursor() as cur:
            cur.execute(f"LISTEN {channel}")

    def heard(self, timeout: float = 1.0) -> list[str]:
        """Every payload NOTIFYed so far (waits up to `timeout` for the first one)."""
        if not self.conn.notifies:
            select.select([self.conn], [], [], timeout)
        self.conn.poll()
        payloads = [n.payload for n in self.conn.notifies]
        self.conn.notifies.clear()
        return payloads

    def events(self, timeout: float = 1.0) -> list[dict[str, Any]]:
        return [json.loads(p) for p in self.heard(timeout)]

    def close(self) -> None:
        self.conn.close()
