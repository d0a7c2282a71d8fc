"""A few queue calls over plain HTTP for tests that set the scene (httpx, no client)."""

from __future__ import annotations

from typing import Any

import httpx


class QueueHttp:
    def __init__(self, url: str, token: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=15)

    def get(self, path: str, **params: Any) -> Any:
        r = self.http.get(path, params=params)
        r.raise_for_status()
        return r.json()

    def post(self, path: str, body: Any) -> Any:
        r = self.http.post(path, json=body)
        r.raise_for_status()
        return r.json()

    def push(self, queue: str, payloads: list[Any], partition: str = "Default",
             **item: Any) -> list[dict[str, Any]]:  # fmt: skip
        items = [{"queue": queue, "partition": partition, "payload": p, **item} for p in payloads]
        results: list[dict[str, Any]] = self.post("/push", {"items": items})
        assert all(r["status"] == "queued" for r in results), results
        return results

    def pop(self, queue: str, batch: int = 1, **params: Any) -> list[dict[str, Any]]:
        r = self.http.get(f"/pop/queue/{queue}", params={"batch": batch, **params})
        r.raise_for_status()
        return [] if r.status_code == 204 else list(r.json()["messages"])

    def ack(self, message: dict[str, Any], status: str = "completed", **extra: Any) -> Any:
        body = {"transactionId": message["transactionId"], "partitionId": message["partitionId"],
                "leaseId": message["leaseId"], "status": status, **extra}  # fmt: skip
        return self.post("/ack", body)

    def dead_letter(self, queue: str, count: int, error: str) -> list[dict[str, Any]]:
        """Push `count` messages and fail each past any retry: they land in the DLQ."""
        self.push(queue, [{"n": i} for i in range(count)])
        failed = []
        for _ in range(count):  # one at a time: a consumer's nack ends its batch's lease
            [message] = self.pop(queue, batch=1)
            assert self.ack(message, "failed", error=error, retryable=False)[0]["dlq"] is True
            failed.append(message)
        return failed

    def close(self) -> None:
        self.http.close()
