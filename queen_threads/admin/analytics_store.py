"""Reads of the analytics tables behind the dashboard's charts: one named statement
(`analytics_*` in schema/queries/analytics.sql, JSON built by PostgreSQL) per method.

`AnalyticsStore` is the only caller of the chart statements; the windows come from
`http/buckets.py`, the answer shapes are in docs/api-admin.md ("Analytics").
"""

from __future__ import annotations

from typing import Any

from queen_threads.db import Statements


class AnalyticsStore:
    """Chart series over the per-minute tables, and the database snapshot."""

    def __init__(self, db: Statements) -> None:
        self.db = db

    def queue_series(
        self,
        window: dict[str, Any],
        queue: str | None = None,
        namespace: str | None = None,
        task: str | None = None,
    ) -> dict[str, Any]:
        """{series, totals, latest} of the message flow and levels. Every queue reads the
        rollup, one queue its own rows, namespace/task the matching queues' rows."""
        if namespace is None and task is None:
            scope = "all" if queue is None else "queue"
        else:
            scope = "filtered"
        return dict(self.db.json("analytics_queue_series", {
            **window, "scope": scope, "queue": queue, "namespace": namespace, "task": task,
        }))  # fmt: skip

    def queue_latest(self, window: dict[str, Any], queue: str | None) -> list[dict[str, Any]]:
        """The newest level sample of each queue in the window, the most lagging first."""
        return list(self.db.json("analytics_queue_latest", {**window, "queue": queue}))

    def process_series(
        self,
        window: dict[str, Any],
        hostname: str | None,
        worker_id: str | None,
        per_worker: bool,
    ) -> dict[str, Any]:
        """{series, totals, workers} of the server processes (workers: None unless
        `per_worker`)."""
        return dict(self.db.json("analytics_process_series", {
            **window, "hostname": hostname, "worker_id": worker_id, "per_worker": per_worker,
        }))  # fmt: skip

    def retention_series(self, window: dict[str, Any], queue: str | None) -> dict[str, Any]:
        return dict(self.db.json("analytics_retention_series", {**window, "queue": queue}))

    def postgres_stats(self) -> dict[str, Any]:
        return dict(self.db.json("analytics_postgres_stats"))

    def queue_exists(self, queue: str) -> bool:
        return bool(self.db.value("analytics_queue_exists", (queue,)))
