"""The official client's admin calls against the real server (JWT off): clear_queue,
get_partitions, refresh_consumer_stats, and every parameter the client sends being known
(its pop and DLQ builders swallow errors, so each call here must also return data)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queen import Queen

from tests.acceptance.conftest import ClientRun

PAST, FUTURE = "2020-01-01T00:00:00Z", "2999-01-01T00:00:00Z"


def test_client_clear_queue_and_get_partitions(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q = unique("clear")

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(q).config({"max_size": 100, "lease_time": 300}).create()
        await client.queue(q).partition("a").push([{"data": {"n": i}} for i in range(3)])
        await client.queue(q).partition("b").push([{"data": {"n": 9}}])
        out["leased"] = await client.queue(q).partition("a").wait(False).pop()  # 300 s lease
        out["clear_a"] = await client.admin.clear_queue(q, partition="a")
        out["parts"] = await client.admin.get_partitions(queue=q)
        out["clear_all"] = await client.admin.clear_queue(q)
        await client.queue(q).partition("a").push({"data": {"n": "after"}})
        out["after"] = await client.queue(q).wait(False).batch(10).pop()
        out["queue"] = await client.admin.get_queue(q)
        return out

    out = client_run(body)
    assert [m["data"] for m in out["leased"]] == [{"n": 0}]
    assert out["clear_a"] == {"cleared": True, "queue": q, "partition": "a", "deleted": 3,
                              "deadLetters": 0, "traces": 0, "partitions": 1}  # fmt: skip
    parts = {p["name"]: p for p in out["parts"]["partitions"]}
    assert sorted(parts) == ["Default", "a", "b"] and out["parts"]["total"] == 3
    assert parts["a"]["messages"]["total"] == 0 and parts["b"]["messages"]["total"] == 1
    assert parts["a"]["consumerGroups"][0]["leaseActive"] is False  # the lease went too
    assert out["clear_all"]["deleted"] == 1 and out["clear_all"]["partition"] is None
    # consumable at once although a consumer had leased partition a for 300 s
    assert [m["data"] for m in out["after"]] == [{"n": "after"}]
    assert out["queue"]["options"]["maxSize"] == 100
    # the queue's partitions as a list, as the original answers (queenctl's queue describe)
    assert [p["name"] for p in out["queue"]["partitions"]] == ["Default", "a", "b"]
    assert out["queue"]["partitionCount"] == 3


def test_client_refresh_consumer_stats(client_run: ClientRun, unique: Callable[[str], str]) -> None:
    q = unique("stats")

    async def body(client: Queen) -> Any:
        await client.queue(q).push({"data": {"n": 1}})
        return await client.admin.refresh_consumer_stats()

    result = client_run(body)
    assert result["success"] is True
    assert "queen.messages" in result["analyzedTables"]
    assert result["totals"]["messages"]["total"] >= 1


def test_client_calls_with_every_option_are_accepted(
    client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    ns, task, g, g2 = unique("ns"), unique("task"), unique("g"), unique("g2")
    q = f"{ns}.{task}"

    async def body(client: Queen) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.queue(q).config({"retry_limit": 0}).create()
        await client.queue(q).partition("p1").push([{"data": {"n": i}} for i in range(6)])

        async def pop(builder: Any) -> list[dict[str, Any]]:
            """Pop with every option the client sends (its pop() never sends autoAck)."""
            msgs: list[dict[str, Any]] = await (
                builder.group(g).subscription_mode("all").subscription_from(PAST)
                .partitions(2).batch(1).wait(False).timeout_millis(1000).pop()
            )  # fmt: skip
            assert (await client.ack(msgs, True, {"group": g}))["success"]
            return msgs

        out["specific"] = await pop(client.queue(q).partition("p1").namespace(ns).task(task))
        out["wildcard"] = await pop(client.queue(q).namespace(ns).task(task))
        out["namespace"] = await pop(client.queue().namespace(ns).task(task))
        [dead] = await client.queue(q).partition("p1").group(g2).wait(False).pop()
        assert (await client.ack(dead, False, {"group": g2, "error": "boom"}))["success"]
        out["dlq"] = await (client.queue(q).partition("p1").dlq(g2).limit(10).offset(0)
                            .from_(PAST).to(FUTURE).get())  # fmt: skip
        admin = client.admin
        out["messages"] = await admin.list_messages(
            queue=q, partition="p1", ns=ns, task=task, status="pending", limit=10, offset=0
        )
        out["partitions"] = await admin.get_partitions(queue=q, limit=10, offset=0)
        out["lagging"] = await admin.get_lagging_consumers(60)
        out["trace_names"] = await admin.get_trace_names(limit=50, offset=0)
        out["by_name"] = await admin.get_traces_by_name("nothing", limit=10, offset=0)
        out["group_queue"] = await admin.delete_consumer_group_for_queue(g2, q, False)
        out["group"] = await client.delete_consumer_group(g, delete_metadata=True)
        out["clear"] = await admin.clear_queue(q, partition="p1")
        return out

    out = client_run(body)
    assert [m["data"] for m in out["specific"]] == [{"n": 0}]
    assert [m["data"] for m in out["wildcard"]] == [{"n": 1}]
    assert [m["data"] for m in out["namespace"]] == [{"n": 2}]
    assert [m["data"] for m in out["dlq"]["messages"]] == [{"n": 0}]
    assert out["dlq"]["total"] == 1
    assert out["messages"]["total"] == 6  # queue mode has read nothing of p1
    assert [p["name"] for p in out["partitions"]["partitions"]] == ["Default", "p1"]
    assert isinstance(out["lagging"], list) and out["trace_names"]["names"] == []
    assert out["by_name"]["traces"] == []
    assert out["group_queue"]["success"] and out["group"]["success"]
    assert out["clear"]["deleted"] == 6
