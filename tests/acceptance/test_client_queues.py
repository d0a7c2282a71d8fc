"""Queue administration and push through the official client (`queen-mq`).

configure, delete, push (single, batch, duplicates), payload round-trips, namespace/task.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from queen import Queen

from tests.acceptance.conftest import ClientRun


def test_client_configure_returns_configured_with_integer_options(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("cfg")
    wanted = {
        "lease_time": 45,
        "retry_limit": 5,
        "priority": 7,
        "max_size": 1000,
        "retry_delay": 250,
    }

    async def body(client: Queen) -> tuple[Any, Any]:
        configured = await client.queue(q).config(wanted).create()
        reset = await client.queue(q).create()  # upsert: options not sent go back to defaults
        return configured, reset

    configured, reset = client_run(body)
    assert configured["configured"] is True
    assert configured["queue"] == q
    assert configured["queueId"] and configured["partitionId"]
    opts = configured["options"]
    for key, value in {
        "leaseTime": 45,
        "retryLimit": 5,
        "priority": 7,
        "maxSize": 1000,
        "retryDelay": 250,
    }.items():
        assert opts[key] == value, key
        assert type(opts[key]) is int, f"{key} echoed as {type(opts[key]).__name__}"
    assert opts["encryptionEnabled"] is False

    assert reset["configured"] is True
    assert reset["queueId"] == configured["queueId"]
    assert reset["options"]["leaseTime"] == 300
    assert reset["options"]["retryLimit"] == 3
    assert reset["options"]["priority"] == 0


def test_client_push_single_and_batch_then_pop_in_order(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("push")

    async def body(client: Queen) -> tuple[Any, Any, Any]:
        single = await client.queue(q).push({"data": {"n": 0}})
        batch = await client.queue(q).push([{"data": {"n": i}} for i in range(1, 6)])
        popped = await client.queue(q).batch(10).wait(False).pop()
        return single, batch, popped

    single, batch, popped = client_run(body)
    assert isinstance(single, list) and len(single) == 1
    assert single[0]["status"] == "queued"
    assert single[0]["message_id"]
    assert [r["status"] for r in batch] == ["queued"] * 5
    assert [r["index"] for r in batch] == list(range(5))
    pushed_ids = [r["transaction_id"] for r in single + batch]
    assert len(set(pushed_ids)) == 6
    assert [m["data"] for m in popped] == [{"n": i} for i in range(6)]
    assert [m["transactionId"] for m in popped] == pushed_ids


def test_client_push_duplicate_transaction_id_reports_duplicate(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("dup")
    tid, tid_in_batch = str(uuid.uuid4()), str(uuid.uuid4())

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {"on_duplicate": []}

        async def on_duplicate(items: list[Any], _err: Exception) -> None:
            out["on_duplicate"].extend(items)

        out["first"] = await client.queue(q).push({"data": {"v": 1}, "transactionId": tid})
        out["second"] = (
            await client.queue(q)
            .push({"data": {"v": 2}, "transactionId": tid})
            .on_duplicate(on_duplicate)
        )
        out["in_batch"] = await client.queue(q).push(
            [
                {"data": {"v": 3}, "transactionId": tid_in_batch},
                {"data": {"v": 4}, "transactionId": tid_in_batch},
            ]
        )
        # Dedup is per partition: the same id on another partition is a new message.
        out["other_partition"] = (
            await client.queue(q).partition("other").push({"data": {"v": 5}, "transactionId": tid})
        )
        # Specific-partition pop first (it leases "other"), so the wildcard pop gets Default.
        out["other_popped"] = await client.queue(q).partition("other").batch(10).wait(False).pop()
        out["default_popped"] = await client.queue(q).batch(10).wait(False).pop()
        return out

    out = client_run(body)
    assert out["first"][0]["status"] == "queued"
    second = out["second"][0]
    assert second["status"] == "duplicate"
    assert second["message_id"] == out["first"][0]["message_id"]
    assert len(out["on_duplicate"]) == 1
    assert [r["status"] for r in out["in_batch"]] == ["queued", "duplicate"]
    assert out["other_partition"][0]["status"] == "queued"
    assert [m["data"] for m in out["default_popped"]] == [{"v": 1}, {"v": 3}]
    assert [m["data"] for m in out["other_popped"]] == [{"v": 5}]
    assert out["other_popped"][0]["partition"] == "other"


def _large_payload() -> dict[str, Any]:
    rows = [
        {"i": i, "text": f"row {i} ünïcødé ✓", "even": i % 2 == 0, "half": i + 0.5, "none": None}
        for i in range(20_000)
    ]
    return {"rows": rows, "meta": {"kind": "large"}}


def test_client_payloads_round_trip_exactly(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("payload")
    large = _large_payload()
    assert len(json.dumps(large)) > 1_500_000
    payloads: list[Any] = [
        None,
        {},
        [],
        [1, "two", {"three": None}],
        "plain string",
        42,
        3.25,
        True,
        {"nested": {"deep": [{"x": None}, {"y": [1, 2, {}]}]}, "emoji": "🐝"},
        large,
    ]

    async def body(client: Queen) -> tuple[Any, Any]:
        pushed = await client.queue(q).push([{"data": p} for p in payloads])
        popped = await client.queue(q).batch(len(payloads) + 5).wait(False).pop()
        return pushed, popped

    pushed, popped = client_run(body)
    assert [r["status"] for r in pushed] == ["queued"] * len(payloads)
    assert len(popped) == len(payloads)
    for sent, msg in zip(payloads, popped, strict=True):
        assert "data" in msg
        assert msg["data"] == sent
        assert type(msg["data"]) is type(sent)


def test_client_namespace_and_task_consumption(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    ns, q = unique("ns"), unique("nsq")
    dotted_ns = unique("dotted")
    dotted = f"{dotted_ns}.mail.inbox"  # auto-created: namespace dotted_ns, task "mail"

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {"consumed": []}
        out["configured"] = await client.queue(q).namespace(ns).task("work").create()
        await client.queue(q).push({"data": {"via": "pop"}})
        await client.queue(dotted).push({"data": {"via": "dotted"}})
        out["popped"] = await client.queue().namespace(ns).task("work").batch(10).wait(False).pop()
        out["dotted"] = await client.queue().namespace(dotted_ns).task("mail").wait(False).pop()
        await client.ack(out["popped"] + out["dotted"])
        out["wrong_task"] = await client.queue().namespace(ns).task("other").wait(False).pop()

        await client.queue(q).push({"data": {"via": "consume"}})

        async def handler(msg: dict[str, Any]) -> None:
            out["consumed"].append(msg["data"])

        await (
            client.queue()
            .namespace(ns)
            .task("work")
            .limit(1)
            .timeout_millis(2000)
            .idle_millis(5000)
            .consume(handler)
        )
        out["after"] = await client.queue(q).wait(False).pop()
        return out

    out = client_run(body)
    assert out["configured"]["namespace"] == ns
    assert out["configured"]["task"] == "work"
    assert [m["data"] for m in out["popped"]] == [{"via": "pop"}]
    assert out["popped"][0]["queue"] == q
    assert [m["data"] for m in out["dotted"]] == [{"via": "dotted"}]
    assert out["dotted"][0]["queue"] == dotted
    assert out["wrong_task"] == []
    assert out["consumed"] == [{"via": "consume"}]
    assert out["after"] == [], "the namespace consumer's auto-ack must have completed it"


def test_client_queue_delete(client_run: ClientRun, unique: Callable[[str], str]) -> None:
    q = unique("del")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(q).create()
        await client.queue(q).push({"data": {"old": True}})
        out["deleted"] = await client.queue(q).delete()
        out["popped_after_delete"] = await client.queue(q).wait(False).pop()
        out["deleted_again"] = await client.queue(q).delete()
        await client.queue(q).push({"data": {"new": True}})
        out["recreated"] = await client.queue(q).batch(10).wait(False).pop()
        return out

    out = client_run(body)
    assert out["deleted"]["deleted"] is True
    assert out["deleted"]["queue"] == q
    assert out["deleted"]["existed"] is True
    assert out["popped_after_delete"] == []
    assert out["deleted_again"]["deleted"] is True
    assert out["deleted_again"]["existed"] is False
    assert [m["data"] for m in out["recreated"]] == [{"new": True}], "old messages are gone"
