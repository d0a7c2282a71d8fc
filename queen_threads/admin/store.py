"""One method per administration operation (messages, consumer groups, traces, resource
listings), one named statement (one round trip) each; the DLQ's are in dlq/store.py.

`AdminStore` is the only caller of the `admin_*` statements in `schema/queries.sql`. Like
`QueueStore` it decrypts payloads of encrypted queues before they leave the server (one that
cannot be decrypted goes out as `data: null` with a `decryptionError` marker).
Optional filters travel as NULL bind parameters; missing things raise `NotFound`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

import orjson

from queen_threads.crypto import PayloadCipher, open_message
from queen_threads.db import Database
from queen_threads.errors import NotFound


class DecryptionObserver(Protocol):
    """Hears each message that could not be decrypted (queue/metrics.py's QueueMetrics)."""

    def decryption_failed(self, message: dict[str, Any], reason: str) -> None: ...


class AdminStore:
    """Administration reads and writes over the database."""

    def __init__(
        self,
        db: Database,
        cipher: PayloadCipher | None = None,
        worker_id: str | None = None,
        observer: DecryptionObserver | None = None,
    ) -> None:
        self.db = db
        self.cipher = cipher
        self.worker_id = worker_id
        self.observer = observer

    def plain(self, message: dict[str, Any]) -> dict[str, Any]:
        """Drop the internal isEncrypted flag, decrypting `data` when it was set."""
        reason = open_message(message, self.cipher)
        if reason is not None and self.observer is not None:
            self.observer.decryption_failed(message, reason)
        return message

    # -- messages -------------------------------------------------------------------
    def messages(
        self,
        *,
        queue: str | None,
        partition: str | None,
        namespace: str | None,
        task: str | None,
        status: str | None,
        from_ts: datetime | None,
        to_ts: datetime | None,
        limit: int,
        offset: int,
    ) -> dict[str, Any]:
        return dict(self.db.json("admin_message_list", {
            "queue": queue, "partition": partition, "namespace": namespace, "task": task,
            "status": status, "from_ts": from_ts, "to_ts": to_ts, "limit": limit,
            "offset": offset,
        }))  # fmt: skip

    def message(self, partition_id: str, transaction_id: str) -> dict[str, Any]:
        found = self.db.json("admin_message_detail", _message_key(partition_id, transaction_id))
        if found is None:
            raise NotFound("Message not found")
        return self.plain(found)

    def delete_message(self, partition_id: str, transaction_id: str) -> dict[str, Any]:
        """{found, deleted, leasedBy}: a message under a live lease is not deleted."""
        result: dict[str, Any] = self.db.json(
            "admin_message_delete", _message_key(partition_id, transaction_id)
        )
        if not result["found"]:
            raise NotFound("Message not found")
        return result

    # -- consumer groups ------------------------------------------------------------
    def consumer_groups(self) -> list[dict[str, Any]]:
        return list(self.db.json("admin_consumer_groups", {"group": None, "details": False}))

    def consumer_group(self, group: str) -> dict[str, Any]:
        found = self.db.json("admin_consumer_groups", {"group": group, "details": True})
        if not found:
            raise NotFound(f"Consumer group {group} not found")
        return dict(found[0])

    def lagging(self, min_lag_seconds: int) -> list[dict[str, Any]]:
        return list(self.db.json("admin_consumer_groups_lagging", {"min_lag": min_lag_seconds}))

    def delete_consumer_group(
        self, group: str, delete_metadata: bool, queue: str | None = None
    ) -> tuple[int, int]:
        """(cursor rows deleted, metadata rows deleted); on one queue when `queue` is set."""
        params = {"group": group, "delete_metadata": delete_metadata, "queue": queue}
        row = self.db.row("admin_delete_consumer_group", params)
        assert row is not None
        return int(row[0]), int(row[1])

    def update_subscription(self, group: str, timestamp: datetime) -> int:
        return self.db.execute(
            "admin_update_subscription", {"group": group, "timestamp": timestamp}
        )

    def seek(
        self,
        group: str,
        queue: str,
        partition: str | None,
        to_end: bool,
        timestamp: datetime | None,
    ) -> int:
        """Partitions whose cursor moved; NotFound for an unknown queue or partition."""
        result = self.db.call("admin_seek_consumer_group", {
            "consumerGroup": group, "queue": queue, "partition": partition, "toEnd": to_end,
            "timestamp": timestamp.isoformat() if timestamp else None,
        })  # fmt: skip
        if not result["queueFound"]:
            raise NotFound(f"Queue {queue} not found")
        if partition is not None and not result["partitionFound"]:
            raise NotFound(f"Partition {partition} of queue {queue} not found")
        return int(result["partitionsUpdated"])

    # -- traces ---------------------------------------------------------------------
    def add_trace(
        self,
        partition_id: str,
        transaction_id: str,
        *,
        data: Any,
        names: list[str],
        group: str | None,
        event_type: str,
    ) -> str:
        trace_id = self.db.value("admin_trace_insert", {
            **_message_key(partition_id, transaction_id),
            "group": group, "event_type": event_type, "data": orjson.dumps(data).decode(),
            "names": names, "worker_id": self.worker_id,
        })  # fmt: skip
        if trace_id is None:
            raise NotFound("Message not found")
        return str(trace_id)

    def traces_for_message(self, partition_id: str, transaction_id: str) -> dict[str, Any]:
        found = self.db.json("admin_traces_for_message", _message_key(partition_id, transaction_id))
        if found is None:
            raise NotFound("Message not found")
        return dict(found)

    def traces_by_name(self, name: str, limit: int, offset: int) -> dict[str, Any]:
        params = {"name": name, "limit": limit, "offset": offset}
        return dict(self.db.json("admin_traces_by_name", params))

    def trace_names(self, limit: int, offset: int) -> dict[str, Any]:
        return dict(self.db.json("admin_trace_names", {"limit": limit, "offset": offset}))

    # -- resources ------------------------------------------------------------------
    def queues(self) -> dict[str, Any]:
        return dict(self.db.json("admin_queue_list", None))

    def queue(self, name: str) -> dict[str, Any]:
        found = self.db.json("admin_queue_detail", {"queue": name})
        if found is None:
            raise NotFound(f"Queue {name} not found")
        return dict(found)

    def partitions(
        self,
        *,
        queue: str | None,
        namespace: str | None,
        task: str | None,
        limit: int,
        offset: int,
    ) -> dict[str, Any]:
        return dict(self.db.json("admin_partition_list", {
            "queue": queue, "namespace": namespace, "task": task, "limit": limit,
            "offset": offset,
        }))  # fmt: skip

    def clear_queue(self, queue: str, partition: str | None) -> dict[str, Any]:
        """Remove the messages of the queue (or of one partition), keeping the queue;
        NotFound for an unknown queue or partition."""
        result: dict[str, Any] = self.db.call(
            "admin_clear_queue", {"queue": queue, "partition": partition}
        )
        if not result["queueFound"]:
            raise NotFound(f"Queue {queue} not found")
        if not result["partitionFound"] and partition is not None:
            raise NotFound(f"Partition {partition} of queue {queue} not found")
        return result

    def refresh_stats(self) -> dict[str, Any]:
        """ANALYZE the queen tables: {analyzedTables, durationMs}."""
        return dict(self.db.json("admin_refresh_stats"))

    def namespaces(self) -> list[dict[str, Any]]:
        return list(self.db.json("admin_namespace_list", {"by_task": False}))

    def tasks(self) -> list[dict[str, Any]]:
        return list(self.db.json("admin_namespace_list", {"by_task": True}))

    # -- status (dashboards) ----------------------------------------------------------
    def status(self, query: str, params: dict[str, Any]) -> Any:
        """One of the `status_*` statements (JSON built by PostgreSQL; None: not found)."""
        return self.db.json(query, params)

    def overview(self) -> dict[str, Any]:
        """`resources_overview` with the background services' last runs."""
        body = dict(self.db.json("resources_overview"))
        body["retention"]["services"] = self.db.json("ops_service_runs") or {}
        return body

    # -- monitoring -----------------------------------------------------------------
    def backlog(self, timeout_ms: int) -> tuple[int, list[tuple[Any, ...]]]:
        """The number of queues and the rows of `ops_backlog` (queue, consumer_group,
        partitions, lag, oldest_epoch), in one transaction bounded by `timeout_ms`."""
        with self.db.transaction() as tx:
            tx.execute("ops_local_timeout", (str(timeout_ms),))
            count = tx.value("ops_queue_count")
            rows = tx.rows("ops_backlog")
        return int(count or 0), rows


def _message_key(partition_id: str, transaction_id: str) -> dict[str, str]:
    return {"partition_id": partition_id, "transaction_id": transaction_id}
