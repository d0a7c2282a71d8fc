"""Failed acks (retries, dead-letter queue) and transactions through the official client."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from queen import Queen

from tests.acceptance.conftest import ClientRun


def test_client_failed_acks_retry_then_dead_letter(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("dlq")
    tid = str(uuid.uuid4())

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {"attempts": []}
        await client.queue(q).config({"retry_limit": 2, "retry_delay": 0}).create()
        await client.queue(q).push({"data": {"message": "boom"}, "transactionId": tid})

        async def handler(msg: dict[str, Any]) -> None:
            out["attempts"].append((msg["transactionId"], msg.get("retryCount")))
            raise ValueError(f"boom attempt {len(out['attempts'])}")

        async def on_error(msg: dict[str, Any], err: Exception) -> None:
            out.setdefault("nacks", []).append(await client.ack(msg, False, {"error": str(err)}))

        # retryLimit 2: first delivery + 2 retries, then the dead-letter queue.
        await (
            client.queue(q)
            .limit(3)
            .timeout_millis(2000)
            .idle_millis(6000)
            .consume(handler)
            .on_error(on_error)
        )
        out["after"] = await client.queue(q).wait(False).pop()
        out["dlq"] = await client.queue(q).dlq().get()
        return out

    out = client_run(body)
    assert [t for t, _ in out["attempts"]] == [tid] * 3
    assert [r for _, r in out["attempts"]] == [0, 1, 2], "retryCount per delivery"
    assert all(n["success"] is True for n in out["nacks"]), out["nacks"]
    assert out["after"] == [], "the cursor moved past the dead-lettered message"
    dlq = out["dlq"]
    assert dlq["total"] == 1
    [dead] = dlq["messages"]
    assert dead["transactionId"] == tid
    assert dead["data"] == {"message": "boom"}
    assert "boom attempt 3" in dead["errorMessage"]
    assert dead["retryCount"] == 2
    assert dead["queue"] == q


def test_client_auto_ack_handler_error_dead_letters_per_group(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q, group, other = unique("autonack"), unique("g-fail"), unique("g-other")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {"deliveries": 0}
        await client.queue(q).config({"retry_limit": 1, "retry_delay": 0}).create()
        await client.queue(q).push({"data": {"n": 1}})

        async def handler(_msg: dict[str, Any]) -> None:
            out["deliveries"] += 1
            raise RuntimeError("handler failed")  # auto-ack turns this into a failed ack

        await (
            client.queue(q)
            .group(group)
            .limit(2)
            .timeout_millis(2000)
            .idle_millis(6000)
            .consume(handler)
        )
        out["after"] = await client.queue(q).group(group).wait(False).pop()
        out["dlq_group"] = await client.queue(q).dlq(group).get()
        out["dlq_other"] = await client.queue(q).dlq(other).get()
        # Another group is unaffected by this group's failures.
        out["other_group"] = await client.queue(q).group(other).wait(False).pop()
        return out

    out = client_run(body)
    assert out["deliveries"] == 2, "first delivery + 1 retry (retryLimit 1)"
    assert out["after"] == []
    [dead] = out["dlq_group"]["messages"]
    assert dead["data"] == {"n": 1}
    assert dead["consumerGroup"] == group
    assert dead["errorMessage"], "a default error text when the client sent none"
    assert out["dlq_other"]["messages"] == []
    assert [m["data"] for m in out["other_group"]] == [{"n": 1}]


def test_client_transaction_commits_ack_and_push_together(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    src, mid, dst, group = unique("tx-src"), unique("tx-mid"), unique("tx-dst"), unique("g-tx")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(src).push({"data": {"step": 1}})
        [msg] = await client.queue(src).wait(False).pop()
        out["commit"] = (
            await client.transaction().ack(msg).queue(mid).push([{"data": {"step": 2}}]).commit()
        )
        out["src_left"] = await client.queue(src).wait(False).pop()

        # A consumer group's message, acked inside a transaction for that group.
        [in_group] = await client.queue(mid).group(group).wait(False).pop()
        out["in_group"] = in_group
        out["commit_group"] = (
            await client.transaction()
            .ack(in_group, "completed", {"consumer_group": group})
            .queue(dst)
            .partition("p1")
            .push({"data": {"step": 3}})
            .commit()
        )
        out["group_left"] = await client.queue(mid).group(group).wait(False).pop()
        out["queue_mode_mid"] = await client.queue(mid).wait(False).pop()
        out["dst"] = await client.queue(dst).wait(False).pop()
        return out

    out = client_run(body)
    commit = out["commit"]
    assert commit["success"] is True
    assert [r["type"] for r in commit["results"]] == ["ack", "push"]
    assert out["src_left"] == [], "the transactional ack completed the message"
    assert out["in_group"]["data"] == {"step": 2}
    assert out["commit_group"]["success"] is True
    assert out["group_left"] == []
    assert [m["data"] for m in out["queue_mode_mid"]] == [{"step": 2}], "other cursors unchanged"
    assert [(m["partition"], m["data"]) for m in out["dst"]] == [("p1", {"step": 3})]


def test_client_transaction_rolls_back_everything_on_failure(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    src, dst = unique("rb-src"), unique("rb-dst")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(src).push({"data": {"keep": True}})
        [msg] = await client.queue(src).wait(False).pop()
        ghost = {"transactionId": str(uuid.uuid4()), "partitionId": msg["partitionId"]}
        with pytest.raises(Exception) as failure:
            await (
                client.transaction()
                .ack(msg)
                .ack(ghost)
                .queue(dst)
                .push({"data": {"never": True}})
                .commit()
            )
        out["error"] = str(failure.value)
        out["dst"] = await client.queue(dst).batch(10).wait(False).pop()
        # The rolled-back ack did not complete `msg`: a nack makes it deliverable again.
        out["nack"] = await client.ack(msg, False)
        out["again"] = await client.queue(src).wait(False).pop()
        return out

    out = client_run(body)
    assert "unresolvable transaction" in out["error"].lower(), out["error"]
    assert out["dst"] == [], "the push in the failed transaction was rolled back"
    assert out["nack"]["success"] is True
    assert [m["data"] for m in out["again"]] == [{"keep": True}]
