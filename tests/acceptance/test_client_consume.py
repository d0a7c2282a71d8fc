"""Pop, ack, consume, long polling, multi-partition pop and leases through the official client."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from queen import Queen

from tests.acceptance.conftest import ClientRun

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)

MICROS_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def _iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_client_pop_then_ack(client_run: ClientRun, unique: Callable[[str], str]) -> None:
    q = unique("popack")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        pushed = await client.queue(q).push({"data": {"k": "v"}})
        out["tid"] = pushed[0]["transaction_id"]
        out["popped"] = await client.queue(q).wait(False).pop()
        out["while_leased"] = await client.queue(q).wait(False).pop()
        out["ack"] = await client.ack(out["popped"][0])
        out["after_ack"] = await client.queue(q).wait(False).pop()
        return out

    out = client_run(body)
    assert len(out["popped"]) == 1
    msg = out["popped"][0]
    assert msg["data"] == {"k": "v"}
    assert msg["transactionId"] == out["tid"]
    assert msg["id"] and msg["partitionId"] and msg["leaseId"]
    assert msg["partition"] == "Default"
    assert msg["queue"] == q
    assert msg["consumerGroup"] == "__QUEUE_MODE__"
    assert msg["retryCount"] == 0
    assert MICROS_ISO.match(msg["createdAt"]), msg["createdAt"]
    assert msg["traceId"] is None and msg["producerSub"] is None
    assert out["while_leased"] == []
    assert out["ack"]["success"] is True
    assert out["after_ack"] == [], "an acked message is not delivered again"


def test_client_ack_with_wrong_lease_is_rejected_without_state_change(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("badlease")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(q).push({"data": {"n": 1}})
        [msg] = await client.queue(q).wait(False).pop()
        out["bad"] = await client.ack({**msg, "leaseId": str(uuid.uuid4())})
        out["still_leased"] = await client.queue(q).wait(False).pop()
        out["good"] = await client.ack(msg)
        out["after"] = await client.queue(q).wait(False).pop()
        return out

    out = client_run(body)
    assert out["bad"]["success"] is False
    assert "lease" in (out["bad"]["error"] or "").lower()
    assert out["still_leased"] == []
    assert out["good"]["success"] is True
    assert out["after"] == []


def test_client_consume_each_auto_acks_every_message(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("each")

    async def body(client: Queen) -> tuple[list[Any], list[Any]]:
        await client.queue(q).push([{"data": {"n": i}} for i in range(5)])
        seen: list[Any] = []

        async def handler(msg: dict[str, Any]) -> None:
            assert isinstance(msg, dict), "each() hands over one message at a time"
            seen.append(msg["data"]["n"])

        await (
            client.queue(q)
            .batch(5)
            .each()
            .limit(5)
            .timeout_millis(2000)
            .idle_millis(5000)
            .consume(handler)
        )
        left = await client.queue(q).batch(10).wait(False).pop()
        return seen, left

    seen, left = client_run(body)
    assert seen == [0, 1, 2, 3, 4]
    assert left == [], "every message was auto-acked"


def test_client_consume_batch_auto_acks_with_batch_ack(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("batch")

    async def body(client: Queen) -> tuple[list[Any], list[Any]]:
        await client.queue(q).push([{"data": {"n": i}} for i in range(6)])
        batches: list[Any] = []

        async def handler(msgs: list[dict[str, Any]]) -> None:
            batches.append([m["data"]["n"] for m in msgs])

        await (
            client.queue(q)
            .batch(3)
            .limit(6)
            .timeout_millis(2000)
            .idle_millis(5000)
            .consume(handler)
        )
        left = await client.queue(q).batch(10).wait(False).pop()
        return batches, left

    batches, left = client_run(body)
    assert batches == [[0, 1, 2], [3, 4, 5]]
    assert left == []


def test_client_consume_batch_with_manual_ack_batch(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("ackbatch")

    async def body(client: Queen) -> tuple[list[Any], list[Any], list[Any]]:
        await client.queue(q).push([{"data": {"n": i}} for i in range(4)])
        seen: list[Any] = []
        acks: list[Any] = []

        async def handler(msgs: list[dict[str, Any]]) -> None:
            seen.extend(m["data"]["n"] for m in msgs)
            acks.append(await client.ack(msgs, True))

        await (
            client.queue(q)
            .batch(4)
            .auto_ack(False)
            .limit(4)
            .timeout_millis(2000)
            .idle_millis(5000)
            .consume(handler)
        )
        left = await client.queue(q).batch(10).wait(False).pop()
        return seen, acks, left

    seen, acks, left = client_run(body)
    assert seen == [0, 1, 2, 3]
    assert len(acks) == 1
    assert acks[0]["success"] is True
    results = acks[0]["results"]
    assert len(results) == 4
    assert all(r["success"] is True for r in results), results
    assert left == []


def test_client_long_poll_consume_receives_message_pushed_later(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("longpoll")

    async def body(client: Queen) -> tuple[list[Any], float]:
        await client.queue(q).create()
        got: list[Any] = []

        async def handler(msg: dict[str, Any]) -> None:
            got.append((msg["data"], time.monotonic()))

        async def consume() -> None:
            await (
                client.queue(q).limit(1).timeout_millis(10_000).idle_millis(15_000).consume(handler)
            )

        consumer = asyncio.create_task(consume())
        # Not synchronisation: the scenario is "the consumer has been waiting for a while
        # when the message arrives" (long enough that the server's idle backoff has grown).
        await asyncio.sleep(1.6)
        assert not consumer.done(), "the long poll must still be waiting"
        pushed_at = time.monotonic()
        await client.queue(q).push({"data": {"late": True}})
        await asyncio.wait_for(consumer, 9)
        return got, pushed_at

    got, pushed_at = client_run(body)
    assert [data for data, _ in got] == [{"late": True}]
    latency = got[0][1] - pushed_at
    assert latency < 1.0, f"a push must wake the waiting consumer (took {latency:.2f}s)"


def test_client_long_poll_pop_returns_empty_at_timeout(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("lpempty")

    async def body(client: Queen) -> tuple[Any, float]:
        await client.queue(q).create()
        start = time.monotonic()
        popped = await client.queue(q).wait(True).timeout_millis(1000).pop()
        return popped, time.monotonic() - start

    popped, elapsed = client_run(body)
    assert popped == []
    assert 0.9 <= elapsed < 3.0, f"waited {elapsed:.2f}s for a 1000 ms long poll"


def test_client_multi_partition_pop(client_run: ClientRun, unique: Callable[[str], str]) -> None:
    q = unique("parts")
    names = ["p0", "p1", "p2"]

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            await client.queue(q).partition(name).push({"data": {"p": name}})
        out["popped"] = await client.queue(q).batch(10).partitions(3).wait(False).pop()
        out["ack"] = await client.ack(out["popped"])
        out["left"] = await client.queue(q).batch(10).partitions(3).wait(False).pop()
        return out

    out = client_run(body)
    msgs = out["popped"]
    assert sorted(m["partition"] for m in msgs) == names
    assert sorted(m["data"]["p"] for m in msgs) == names
    assert len({m["partitionId"] for m in msgs}) == 3
    assert len({m["leaseId"] for m in msgs}) == 1, "one pop shares one leaseId"
    assert out["ack"]["success"] is True
    assert all(r["success"] for r in out["ack"]["results"]), out["ack"]["results"]
    assert out["left"] == []


def test_client_multi_partition_pop_caps_batch_globally(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("partcap")

    async def body(client: Queen) -> tuple[list[Any], list[Any]]:
        for name in ("a", "b", "c"):
            await (
                client.queue(q)
                .partition(name)
                .push([{"data": {"p": name, "i": i}} for i in range(2)])
            )
        rounds: list[Any] = []
        seen: list[Any] = []
        for _ in range(6):  # never loops forever if the server misbehaves
            msgs = await client.queue(q).batch(4).partitions(3).wait(False).pop()
            if not msgs:
                break
            rounds.append(len(msgs))
            seen.extend(msgs)
            assert (await client.ack(msgs))["success"] is True
        return rounds, seen

    rounds, seen = client_run(body)
    assert all(n <= 4 for n in rounds), f"batch is a global cap: {rounds}"
    assert rounds[0] > 2, f"the first pop drew from more than one partition: {rounds}"
    assert len(seen) == 6
    for name in ("a", "b", "c"):
        in_partition = [m["data"]["i"] for m in seen if m["partition"] == name]
        assert in_partition == [0, 1], f"partition {name} in order, once each"


def test_client_consume_specific_partition(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("onepart")

    async def body(client: Queen) -> tuple[list[Any], list[Any]]:
        await client.queue(q).partition("left").push({"data": {"side": "left"}})
        await client.queue(q).partition("right").push({"data": {"side": "right"}})
        got: list[Any] = []

        async def handler(msg: dict[str, Any]) -> None:
            got.append((msg["partition"], msg["data"]))

        await (
            client.queue(q)
            .partition("right")
            .limit(1)
            .timeout_millis(2000)
            .idle_millis(5000)
            .consume(handler)
        )
        rest = await client.queue(q).batch(10).wait(False).pop()
        return got, rest

    got, rest = client_run(body)
    assert got == [("right", {"side": "right"})]
    assert [m["data"] for m in rest] == [{"side": "left"}]


def test_client_renew_lease(client_run: ClientRun, unique: Callable[[str], str]) -> None:
    q = unique("renew")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(q).config({"lease_time": 30}).create()
        await client.queue(q).push({"data": {"n": 1}})
        [msg] = await client.queue(q).wait(False).pop()
        out["msg"] = msg
        out["renewed"] = await client.renew(msg)
        out["renewed_list"] = await client.renew([msg, msg])
        out["unknown"] = await client.renew(str(uuid.uuid4()))
        out["ack"] = await client.ack(msg)
        return out

    out = client_run(body)
    lease = out["msg"]["leaseId"]
    renewed = out["renewed"]
    assert renewed["success"] is True
    assert renewed["leaseId"] == lease
    assert renewed["newExpiresAt"], renewed
    assert _iso(renewed["newExpiresAt"]) > datetime.now(UTC)
    assert isinstance(out["renewed_list"], list) and len(out["renewed_list"]) == 1
    assert out["renewed_list"][0]["success"] is True
    assert out["unknown"]["success"] is False
    assert out["ack"]["success"] is True, "the renewed lease is still valid"


def test_client_consume_renews_lease_while_handler_runs(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("autorenew")

    async def body(client: Queen) -> tuple[list[Any], list[Any]]:
        # leaseTime 1 s; the handler takes 2 s. Without renewals the lease expires, the
        # auto-ack is refused and the message is delivered again.
        await client.queue(q).config({"lease_time": 1}).create()
        await client.queue(q).push({"data": {"slow": True}})
        handled: list[Any] = []

        async def handler(msg: dict[str, Any]) -> None:
            await asyncio.sleep(2.0)  # the work itself: outlives the lease on purpose
            handled.append(msg["data"])

        await (
            client.queue(q)
            .renew_lease(True, 300)
            .limit(1)
            .timeout_millis(2000)
            .idle_millis(5000)
            .consume(handler)
        )
        left = await client.queue(q).wait(False).pop()
        return handled, left

    handled, left = client_run(body)
    assert handled == [{"slow": True}]
    assert left == [], "the auto-ack after the renewed lease succeeded"
