"""Helpers for the HTTP tests of the administration routes (test_http_admin_*.py).

`admin` wraps falcon's in-process test client around the whole application on a fresh
database: data is produced through the real routes (configure, push, pop, ack), and
`snapshot()` reads the state tables directly to prove that a rejected request changed
nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import falcon.testing
import psycopg2.extensions
import pytest

from queen_threads.app import create_app
from queen_threads.runtime import Runtime

API = "/api/v1"
STATE_TABLES = (
    "queues",
    "partitions",
    "messages",
    "partition_consumers",
    "consumer_groups_metadata",
    "conflation_groups",
    "dead_letter_queue",
    "message_traces",
    "message_trace_names",
)


class AdminApi:
    """The application plus shortcuts to produce messages, leases and DLQ rows."""

    def __init__(self, client: falcon.testing.TestClient, conn: psycopg2.extensions.connection):
        self.client = client
        self.conn = conn

    # -- raw HTTP -------------------------------------------------------------------
    def get(self, path: str, **params: Any) -> falcon.testing.Result:
        return self.client.simulate_get(f"{API}{path}", params=params or None)

    def delete(self, path: str, **params: Any) -> falcon.testing.Result:
        return self.client.simulate_delete(f"{API}{path}", params=params or None)

    def post(self, path: str, body: Any = None, raw: bytes | None = None) -> falcon.testing.Result:
        if raw is not None:
            return self.client.simulate_post(f"{API}{path}", body=raw)
        if body is None:
            return self.client.simulate_post(f"{API}{path}")
        return self.client.simulate_post(f"{API}{path}", json=body)

    # -- producing data through the real routes -------------------------------------
    def configure(self, queue: str, **options: Any) -> None:
        res = self.post("/configure", {"queue": queue, "options": options})
        assert res.status_code == 200, res.text

    def push(
        self, queue: str, payloads: list[Any], partition: str = "Default"
    ) -> list[dict[str, Any]]:
        items = [
            {"queue": queue, "partition": partition, "payload": p, "transactionId": uuid4()}
            for p in payloads
        ]
        res = self.post("/push", {"items": items})
        assert res.status_code == 201, res.text
        assert all(r["status"] == "queued" for r in res.json), res.json
        return list(res.json)

    def pop(
        self, queue: str, batch: int = 1, group: str | None = None, partition: str | None = None
    ) -> list[dict[str, Any]]:
        path = f"/pop/queue/{queue}" + (f"/partition/{partition}" if partition else "")
        params: dict[str, Any] = {"batch": batch, "wait": "false"}
        if group:
            params["consumerGroup"] = group
        res = self.get(path, **params)
        if res.status_code == 204:
            return []
        assert res.status_code == 200, res.text
        return list(res.json["messages"])

    def ack(
        self, message: dict[str, Any], status: str = "completed", error: str | None = None
    ) -> dict[str, Any]:
        body = {
            "transactionId": message["transactionId"],
            "partitionId": message["partitionId"],
            "leaseId": message["leaseId"],
            "consumerGroup": message["consumerGroup"],
            "status": status,
            "error": error,
        }
        res = self.post("/ack", body)
        assert res.status_code == 200, res.text
        result = res.json[0] if isinstance(res.json, list) else res.json
        assert result["success"], result
        return dict(result)

    def dead_letter(
        self,
        queue: str,
        payloads: list[Any],
        group: str | None = None,
        error: str = "boom",
        partition: str = "Default",
        **options: Any,
    ) -> list[dict[str, Any]]:
        """Push, pop and fail every payload once on a queue with retryLimit 0 (straight to
        the DLQ); returns the popped messages in order. `options`: more queue options."""
        self.configure(queue, retryLimit=0, **options)
        self.push(queue, payloads, partition)
        return [self.fail_next(queue, group, error, partition) for _ in payloads]

    def fail_next(
        self, queue: str, group: str | None = None, error: str = "boom", partition: str = "Default"
    ) -> dict[str, Any]:
        """Pop the group's next message and fail it (DLQ on a queue with retryLimit 0)."""
        [message] = self.pop(queue, group=group, partition=partition)
        assert self.ack(message, "failed", error)["status"] == "failed_dlq"
        return message

    # -- direct reads ---------------------------------------------------------------
    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(query, args)
            return list(cur.fetchall()) if cur.description else []

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of the state tables (proves that a rejected request changed nothing)."""
        return {t: self.sql(f"SELECT * FROM queen.{t} ORDER BY 1, 2") for t in STATE_TABLES}


def uuid4() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def admin(
    make_runtime: Callable[..., Runtime], pg_conn: psycopg2.extensions.connection
) -> AdminApi:
    return AdminApi(falcon.testing.TestClient(create_app(make_runtime())), pg_conn)


@pytest.fixture
def make_admin(
    make_runtime: Callable[..., Runtime], pg_conn: psycopg2.extensions.connection
) -> Callable[..., AdminApi]:
    """An AdminApi whose runtime gets settings overrides (env names), e.g. an encryption key."""

    def make(**env: str) -> AdminApi:
        return AdminApi(falcon.testing.TestClient(create_app(make_runtime(**env))), pg_conn)

    return make
