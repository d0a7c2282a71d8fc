"""Consumer groups and subscription modes through the official client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queen import Queen

from tests.acceptance.conftest import ClientRun


async def _consume_all(client: Queen, q: str, group: str | None, mode: str | None, n: int) -> list:
    """Consume exactly `n` messages (auto-ack) and return their `data["n"]` values."""
    got: list[Any] = []

    async def handler(msg: dict[str, Any]) -> None:
        got.append(msg["data"]["n"])

    builder = client.queue(q)
    if group:
        builder = builder.group(group)
    if mode:
        builder = builder.subscription_mode(mode)
    await builder.limit(n).timeout_millis(2000).idle_millis(5000).consume(handler)
    return got


async def _pop_now(client: Queen, q: str, group: str | None = None, **modes: str) -> list:
    builder = client.queue(q).batch(50).wait(False)
    if group:
        builder = builder.group(group)
    if "mode" in modes:
        builder = builder.subscription_mode(modes["mode"])
    if "start" in modes:
        builder = builder.subscription_from(modes["start"])
    msgs = await builder.pop()
    if msgs:
        assert (await client.ack(msgs, True, {"group": group} if group else {}))["success"]
    return msgs


def _ns(msgs: list[dict[str, Any]]) -> list[Any]:
    return [m["data"]["n"] for m in msgs]


def test_client_consumer_groups_each_receive_every_message_once(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q, g_all, g_begin = unique("fanout"), unique("g-all"), unique("g-begin")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(q).push([{"data": {"n": i}} for i in range(4)])
        out["all"] = await _consume_all(client, q, g_all, "all", 4)
        out["begin"] = await _consume_all(client, q, g_begin, "from_beginning", 4)
        out["queue_mode"] = await _consume_all(client, q, None, None, 4)
        out["again"] = [_ns(await _pop_now(client, q, g)) for g in (g_all, g_begin, None)]
        await client.queue(q).push({"data": {"n": 4}})
        out["next"] = [_ns(await _pop_now(client, q, g)) for g in (g_all, g_begin, None)]
        return out

    out = client_run(body)
    assert out["all"] == [0, 1, 2, 3]
    assert out["begin"] == [0, 1, 2, 3]
    assert out["queue_mode"] == [0, 1, 2, 3], "groups do not consume for queue mode"
    assert out["again"] == [[], [], []], "each group receives a message once"
    assert out["next"] == [[4], [4], [4]]


def test_client_consumer_group_message_fields(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q, group = unique("gfields"), unique("g")

    async def body(client: Queen) -> Any:
        await client.queue(q).push({"data": {"n": 1}})
        return await _pop_now(client, q, group)

    [msg] = client_run(body)
    assert msg["consumerGroup"] == group
    assert msg["leaseId"]


def test_client_subscription_new_skips_history(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("subnew")
    g_new, g_alias, g_now = unique("g-new"), unique("g-alias"), unique("g-now")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(q).push([{"data": {"n": i}} for i in range(3)])
        out["first"] = [
            _ns(await _pop_now(client, q, g_new, mode="new")),
            _ns(await _pop_now(client, q, g_alias, mode="new-only")),
            _ns(await _pop_now(client, q, g_now, start="now")),
        ]
        await client.queue(q).push([{"data": {"n": 10}}, {"data": {"n": 11}}])
        out["later"] = [
            _ns(await _pop_now(client, q, g_new, mode="new")),
            _ns(await _pop_now(client, q, g_alias, mode="new-only")),
            _ns(await _pop_now(client, q, g_now, start="now")),
        ]
        # The subscription is stored: pops without a mode continue from the cursor.
        await client.queue(q).push({"data": {"n": 12}})
        out["plain"] = [_ns(await _pop_now(client, q, g)) for g in (g_new, g_alias, g_now)]
        return out

    out = client_run(body)
    assert out["first"] == [[], [], []], "a new subscription skips the history"
    assert out["later"] == [[10, 11]] * 3
    assert out["plain"] == [[12]] * 3


def test_client_subscription_from_timestamp(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q, group = unique("subts"), unique("g-ts")

    async def body(client: Queen) -> tuple[list[Any], list[Any]]:
        for i in range(1, 4):  # separate requests: distinct createdAt per message
            await client.queue(q).push({"data": {"n": i}})
        history = await _pop_now(client, q)  # queue mode; reads the timestamps
        start = history[0]["createdAt"]
        got = await _pop_now(client, q, group, start=start)
        return history, got

    history, got = client_run(body)
    assert _ns(history) == [1, 2, 3]
    assert _ns(got) == [2, 3], f"start strictly after {history[0]['createdAt']}"


def test_client_delete_consumer_group_resets_its_cursor(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q, group = unique("gdel"), unique("g-del")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(q).push([{"data": {"n": i}} for i in range(2)])
        out["first"] = _ns(await _pop_now(client, q, group))
        out["deleted"] = await client.delete_consumer_group(group, delete_metadata=True)
        out["after_delete"] = _ns(await _pop_now(client, q, group, mode="all"))
        return out

    out = client_run(body)
    assert out["first"] == [0, 1]
    assert out["deleted"]["success"] is True
    assert out["after_delete"] == [0, 1], "a deleted group starts again from the beginning"
