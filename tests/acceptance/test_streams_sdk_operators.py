"""The official 0.15.0 client's streaming SDK on the real server: the stateless operators
(filter, flat_map, map), reduce, foreach, the gate (a partial ack that keeps the lease), and
recovery: a restarted query resumes from its stored state, a query whose operator chain
changed is refused (409) until it runs with reset, which drops the old state."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from queen import Queen, Stream
from queen.streams.runtime.register import StreamsConfigHashMismatch

from tests.acceptance.conftest import ClientRun
from tests.support.server import ServerProcess
from tests.support.streams_sdk import drain, nothing_more, running, sql, state_keys

BASE = 1_700_000_040_000


def event_time(m: dict[str, Any]) -> int:
    return int(m["data"]["ts"])


async def push(client: Queen, queue: str, rows: list[dict[str, Any]]) -> None:
    await client.queue(queue).partition("p1").push([{"data": r} for r in rows])


def test_filter_flat_map_and_map_transform_each_message(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    src, sink, query = unique("sdk-ops-src"), unique("sdk-ops-sink"), unique("sdk-ops")

    async def body(client: Queen) -> None:
        await push(client, src, [{"v": v} for v in range(1, 6)])
        stream = (
            Stream.from_(client.queue(src))
            .filter(lambda m: m["data"]["v"] % 2 == 1)
            .flat_map(lambda m: [{"v": m["data"]["v"]}, {"v": -m["data"]["v"]}])
            .to(client.queue(sink))
        )

        async def check() -> None:
            out = await drain(client, sink, 6)
            assert sorted(o["v"] for o in out) == [-5, -3, -1, 1, 3, 5]
            assert await nothing_more(client, sink) == []

        await running(stream, query, client_server.url, check)

    client_run(body)


def test_reduce_folds_a_window_and_map_reshapes_its_result(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    src, sink, query = unique("sdk-red-src"), unique("sdk-red-sink"), unique("sdk-red")
    rows = [{"v": 3, "ts": BASE + 10}, {"v": 4, "ts": BASE + 20}, {"v": 0, "ts": BASE + 5000}]

    async def body(client: Queen) -> None:
        await push(client, src, rows)
        stream = (
            Stream.from_(client.queue(src))
            .window_tumbling(seconds=1, event_time=event_time, idle_flush_ms=0)
            .reduce(lambda acc, d: acc + d["v"] * d["v"], 0)
            .map(lambda total: {"total": total})
            .to(client.queue(sink))
        )

        async def check() -> None:
            assert await drain(client, sink, 1) == [{"total": 25}]
            assert await nothing_more(client, sink) == []

        await running(stream, query, client_server.url, check)

    client_run(body)


def test_foreach_sees_each_closed_window_once(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    src, query = unique("sdk-each-src"), unique("sdk-each")
    rows = [{"v": 1, "ts": BASE}, {"v": 2, "ts": BASE + 1500}, {"v": 0, "ts": BASE + 9000}]
    seen: list[tuple[int, int]] = []

    async def body(client: Queen) -> None:
        await push(client, src, rows)
        done = asyncio.Event()

        def effect(value: dict[str, Any], ctx: dict[str, Any]) -> None:
            seen.append((ctx["windowStart"] - BASE, value["sum"]))
            if len(seen) >= 2:
                done.set()

        stream = (
            Stream.from_(client.queue(src))
            .window_tumbling(seconds=1, event_time=event_time, idle_flush_ms=0)
            .aggregate({"sum": lambda d: d["v"]})
            .foreach(effect)
        )

        async def check() -> None:
            await asyncio.wait_for(done.wait(), 20)

        await running(stream, query, client_server.url, check)

    client_run(body)
    assert sorted(seen) == [(0, 1), (1000, 2)]


def test_gate_acks_the_allowed_head_and_keeps_the_lease_on_the_rest(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    """A gate allowing two messages per key: the cycle acks them (with the gate's state)
    and keeps the lease on the denied tail (release_lease false), so nothing else of the
    partition is delivered meanwhile. The SDK orders a batch by id as a string: message ids
    have 15 digits (migration 0025), so that is delivery order; with ids of different
    lengths (99..103) its gate took [1, 2] first and its ack committed 0 unseen."""
    src, sink, query = unique("sdk-gate-src"), unique("sdk-gate-sink"), unique("sdk-gate")

    def two_per_key(value: Any, ctx: Any) -> bool:
        used = int(ctx.state.get("used", 0))
        if used >= 2:
            return False
        ctx.state["used"] = used + 1
        return True

    async def body(client: Queen) -> None:
        await client.queue(src).config({"leaseTime": 60}).create()
        await push(client, src, [{"v": v} for v in range(5)])
        stream = Stream.from_(client.queue(src)).gate(two_per_key).to(client.queue(sink))

        async def check() -> None:
            out = await drain(client, sink, 2)
            assert sorted(o["v"] for o in out) == [0, 1]
            assert await nothing_more(client, sink) == []

        await running(stream, query, client_server.url, check)

    client_run(body)
    dsn = client_server.env["DATABASE_URL"]
    [(acked, leased)] = sql(
        dsn,
        "SELECT sh.acked, pc.lease_expires_at > now() FROM queen.sdk_shards sh"
        " JOIN queen.sdk_queries q ON q.id = sh.query_id"
        " JOIN queen.partition_consumers pc ON pc.partition_id = sh.partition_id"
        " AND pc.consumer_group = sh.consumer_group WHERE q.name = %s",
        query,
    )
    assert (acked, leased) == (2, True)
    [(value,)] = sql(
        dsn,
        "SELECT s.value FROM queen.sdk_state s JOIN queen.sdk_queries q ON q.id = s.query_id"
        " WHERE q.name = %s",
        query,
    )
    assert value == {"used": 2}


def tumbling(client: Queen, src: str, sink: str, seconds: int = 1) -> Stream:
    return (
        Stream.from_(client.queue(src))
        .window_tumbling(seconds=seconds, event_time=event_time, idle_flush_ms=0)
        .aggregate({"sum": lambda d: d["v"]})
        .to(client.queue(sink))
    )


def test_a_restarted_query_resumes_from_its_stored_state(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    src, sink, query = unique("sdk-rec-src"), unique("sdk-rec-sink"), unique("sdk-rec")
    dsn = client_server.env["DATABASE_URL"]

    async def first(client: Queen) -> None:
        await push(client, src, [{"v": 1, "ts": BASE + 100}, {"v": 2, "ts": BASE + 200}])

        async def consumed() -> None:  # both in the open window's state, nothing emitted
            for _ in range(200):
                keys = state_keys(dsn, query)
                if any(k.startswith("tumb:") for k in keys):
                    return
                await asyncio.sleep(0.05)
            raise AssertionError("the first messages never reached the state")

        await running(tumbling(client, src, sink), query, client_server.url, consumed)

    async def second(client: Queen) -> None:
        await push(client, src, [{"v": 4, "ts": BASE + 700}, {"v": 0, "ts": BASE + 3000}])

        async def check() -> None:
            assert await drain(client, sink, 1) == [{"sum": 7}]
            assert await nothing_more(client, sink) == []

        await running(tumbling(client, src, sink), query, client_server.url, check)

    client_run(first)
    client_run(second)


def test_a_changed_operator_chain_is_refused_until_it_runs_with_reset(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    src, sink, query = unique("sdk-reset-src"), unique("sdk-reset-sink"), unique("sdk-reset")
    dsn = client_server.env["DATABASE_URL"]

    async def old_shape(client: Queen) -> None:
        await push(client, src, [{"v": 1, "ts": BASE + 100}, {"v": 0, "ts": BASE + 1500}])

        async def check() -> None:
            assert await drain(client, sink, 1) == [{"sum": 1}]

        await running(tumbling(client, src, sink), query, client_server.url, check)

    async def new_shape(client: Queen, **opts: Any) -> Any:
        return await tumbling(client, src, sink, seconds=2).run(
            query_id=query, url=client_server.url, **opts
        )

    async def refused(client: Queen) -> None:
        with pytest.raises(StreamsConfigHashMismatch, match="reset=True"):
            await new_shape(client)

    async def reset(client: Queen) -> None:
        runner = await new_shape(client, reset=True)
        try:
            await push(client, src, [{"v": 5, "ts": BASE + 2100}, {"v": 0, "ts": BASE + 9000}])
            # The old open window (1.5 s, sum 0) is gone; 2 s windows from now on.
            assert await drain(client, sink, 1) == [{"sum": 5}]
            assert await nothing_more(client, sink) == []
        finally:
            await runner.stop()

    client_run(old_shape)
    before = state_keys(dsn, query)
    assert any(k.startswith("tumb:1\x1f") for k in before)
    client_run(refused)
    assert state_keys(dsn, query) == before
    client_run(reset)
    assert not any(k.startswith("tumb:1\x1f") for k in state_keys(dsn, query))
