"""Retry policy and failure classes through the real server and the official client
(docs/retries.md): redelivery waits grow as configured, and a validation failure or a
`dlq` ack reaches the dead-letter queue on its first attempt."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from typing import Any

from queen import Queen

from tests.acceptance.conftest import ClientRun

DELAY_MS = 300
# Redelivery is woken when the wait ends (not found by backoff polling), so a gap is its
# delay plus an ack, a pop and two HTTP round trips; the slack allows for a loaded machine.
SLACK_S = 0.25


def test_client_redelivery_waits_grow_exponentially(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q, tid = unique("backoff"), str(uuid.uuid4())

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {"seen": []}
        await (
            client.queue(q)
            .config(
                {
                    "retry_limit": 3,
                    "retry_delay": DELAY_MS,
                    "retry_strategy": "exponential",
                    "retry_jitter": 0,
                }
            )
            .create()
        )
        [pushed] = await client.queue(q).push({"data": {"n": 1}, "transactionId": tid})

        async def handler(msg: dict[str, Any]) -> None:
            out["seen"].append((time.monotonic(), msg["retryCount"]))
            if len(out["seen"]) < 3:
                raise RuntimeError("not yet")  # the client's auto-ack sends `failed`

        # Long polls (wait=true) await each redelivery; nothing here sleeps.
        await client.queue(q).limit(3).timeout_millis(5000).idle_millis(10000).consume(handler)
        pid = pushed["partition_id"]
        out["traces"] = await client.admin.get_traces_for_message(pid, tid)
        out["detail"] = await client.admin.get_message(pid, tid)
        return out

    out = client_run(body)
    times, retry_counts = zip(*out["seen"], strict=True)
    assert list(retry_counts) == [0, 1, 2]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    first, second = DELAY_MS / 1000, 2 * DELAY_MS / 1000
    assert first <= gaps[0] < first + SLACK_S, gaps
    assert second <= gaps[1] < second + SLACK_S, gaps
    scheduled = [t["data"] for t in out["traces"]["traces"] if t["eventType"] == "retry_scheduled"]
    assert [(d["attempt"], d["delayMs"], d["strategy"]) for d in scheduled] == [
        (1, DELAY_MS, "exponential"),
        (2, 2 * DELAY_MS, "exponential"),
    ]
    [state] = out["detail"]["consumerGroups"]
    assert (state["status"], state["attempts"]) == ("completed", []), "done: history cleared"


def test_client_validation_failure_and_dlq_ack_dead_letter_at_once(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("classes")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(q).config({"retry_limit": 5, "retry_delay": 0}).create()
        await client.queue(q).push([{"data": {"n": 1}}, {"data": {"n": 2}}])

        # The client's public ack cannot carry errorType/retryable: its own HTTP layer can.
        [invalid] = await client.queue(q).wait(False).pop()
        out["ack"] = await client._http_client.post(
            "/api/v1/ack",
            {
                "transactionId": invalid["transactionId"],
                "partitionId": invalid["partitionId"],
                "leaseId": invalid["leaseId"],
                "status": "failed",
                "error": "amount must be positive",
                "errorType": "validation",
            },
        )
        [poison] = await client.queue(q).wait(False).pop()
        out["dlq_ack"] = await client.ack(poison, "dlq", {"error": "poison message"})
        out["left"] = await client.queue(q).wait(False).pop()
        out["dlq"] = await client.queue(q).dlq().get()
        return out

    out = client_run(body)
    assert (out["ack"][0]["status"], out["ack"][0]["dlq"]) == ("failed_dlq", True)
    assert out["dlq_ack"]["success"] is True
    assert out["left"] == [], "both dead-lettered on their first delivery, none retried"
    rows = {r["data"]["n"]: r for r in out["dlq"]["messages"]}
    assert set(rows) == {1, 2}
    assert (rows[1]["errorMessage"], rows[1]["errorType"], rows[1]["retryCount"]) == (
        "amount must be positive",
        "validation",
        0,
    )
    assert (rows[2]["errorMessage"], rows[2]["errorType"], rows[2]["retryCount"]) == (
        "poison message",
        None,
        0,
    )
    assert [len(r["attempts"]) for r in (rows[1], rows[2])] == [1, 1]
    assert rows[1]["attempts"][0]["error"] == "amount must be positive"
