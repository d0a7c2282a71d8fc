"""A paced bulk DLQ requeue on the real gunicorn -k gevent server (one worker process)."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from tests.support.server import ServerProcess

QUEUE = "paced"


def dead_letter_all(api: str, count: int) -> list[str]:
    """Push `count` messages and dead-letter them with one batch ack (status dlq)."""
    items = [{"queue": QUEUE, "payload": i, "transactionId": f"t-{i:02d}"} for i in range(count)]
    assert httpx.post(f"{api}/push", json={"items": items}).status_code == 201
    popped = httpx.get(f"{api}/pop/queue/{QUEUE}", params={"wait": "false", "batch": count})
    messages = popped.json()["messages"]
    acks = [{**{k: m[k] for k in ("transactionId", "partitionId", "leaseId")}, "status": "dlq"}
            for m in messages]  # fmt: skip
    answer = httpx.post(f"{api}/ack/batch", json={"acknowledgments": acks}).json()
    assert [a["status"] for a in answer] == ["failed_dlq"] * count
    return [m["transactionId"] for m in messages]


def test_a_paced_requeue_shows_progress_and_keeps_the_worker_serving(migrated_dsn: str) -> None:
    with ServerProcess(migrated_dsn, workers=1) as srv:
        api = f"{srv.url}/api/v1"
        originals = dead_letter_all(api, 15)
        result: dict[str, Any] = {}

        def run() -> None:
            body = {"queue": QUEUE, "perSecond": 5}
            result["res"] = httpx.post(f"{api}/dlq/requeue", json=body, timeout=30)

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        # A long poll is woken by the first chunk's commit while the run goes on.
        popped = httpx.get(
            f"{api}/pop/queue/{QUEUE}",
            params={"wait": "true", "timeout": "5000", "batch": 15},
            timeout=10,
        )
        assert popped.status_code == 200
        first = [m["transactionId"].split(":retry:")[0] for m in popped.json()["messages"]]
        assert runner.is_alive(), "the first copies were visible before the run ended"
        assert first == originals[: len(first)] and len(first) in (5, 10)
        # The run waits in its greenlet: the same (only) worker answers meanwhile.
        started = time.monotonic()
        assert httpx.get(f"{srv.url}/health", timeout=5).status_code == 200
        assert time.monotonic() - started < 0.5
        assert runner.is_alive()
        runner.join(30)
        res = result["res"]
        assert res.status_code == 200, res.text
        assert (res.json()["requeued"], res.json()["matched"]) == (15, 15)
        assert res.json()["durationMs"] >= 1900
