"""The dead-letter queue over the database: the list, one message's requeue, and the
preview and chunks of a bulk requeue (schema/queries/dlq.sql; stored functions in
schema/functions/85_dlq.sql). Payloads leave decrypted like every admin read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from queen_threads.db import Database
from queen_threads.errors import NotFound

Plain = Callable[[dict[str, Any]], dict[str, Any]]


class DlqStore:
    """`plain` opens a message leaving the server (AdminStore.plain: decrypts it)."""

    def __init__(self, db: Database, plain: Plain) -> None:
        self.db = db
        self.plain = plain

    def dlq(
        self,
        *,
        queue: str | None,
        partition: str | None,
        group: str | None,
        from_ts: datetime | None,
        to_ts: datetime | None,
        limit: int,
        offset: int,
        error: str | None = None,
    ) -> dict[str, Any]:
        page: dict[str, Any] = self.db.json("admin_dlq_list", {
            "queue": queue, "partition": partition, "group": group, "error": error,
            "from_ts": from_ts, "to_ts": to_ts, "limit": limit, "offset": offset,
        })  # fmt: skip
        page["messages"] = [self.plain(m) for m in page["messages"]]
        return page

    def requeue(self, partition_id: str, transaction_id: str, group: str | None) -> dict[str, Any]:
        result: dict[str, Any] = self.db.call("admin_requeue_dlq_message", {
            "partitionId": partition_id, "transactionId": transaction_id, "consumerGroup": group,
        })  # fmt: skip
        if not result["messageFound"]:
            raise NotFound("Message not found")
        if not result["found"]:
            suffix = f" for consumer group {group}" if group else ""
            raise NotFound(f"Message is not in the dead-letter queue{suffix}")
        return result

    def dlq_requeue_preview(self, selection: dict[str, Any], sample: int) -> dict[str, Any]:
        """{matched, partitions, sample} of a bulk requeue selection; changes nothing."""
        return dict(self.db.call("admin_dlq_requeue_preview", {**selection, "sample": sample}))

    def dlq_requeue_chunk(
        self, selection: dict[str, Any], limit: int, from_partition: str | None
    ) -> dict[str, Any]:
        """One chunk (one transaction) of a bulk requeue: {requeued, partitions,
        lastPartitionId}; the driver is dlq/service.py."""
        return dict(self.db.call("admin_dlq_requeue_chunk", {
            **selection, "limit": limit, "fromPartition": from_partition,
        }))  # fmt: skip
