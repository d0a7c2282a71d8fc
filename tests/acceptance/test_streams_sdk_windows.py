"""The official 0.15.0 client's streaming SDK (`queen.Stream`) on the real server: the
window kinds (tumbling, sliding, session, cron), event time with a grace period, the idle
flush, the stateless operators, and recovery with `reset`. Each pipeline's output is read
from its sink queue with long polls, and compared with what the input must give."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from queen import Queen, Stream

from tests.acceptance.conftest import ClientRun
from tests.support.server import ServerProcess
from tests.support.streams_sdk import drain, nothing_more, running, state_keys

BASE = 1_700_000_040_000  # event times (ms), on a minute boundary


def event_time(m: dict[str, Any]) -> int:
    return int(m["data"]["ts"])


def labelled(agg: Any, ctx: dict[str, Any]) -> dict[str, Any]:
    """Post-window map: the aggregate plus its key and window start."""
    return {**agg, "key": ctx["key"], "windowStart": ctx["windowStart"]}


async def push(client: Queen, queue: str, partition: str, rows: list[dict[str, Any]]) -> None:
    await client.queue(queue).partition(partition).push([{"data": r} for r in rows])


def test_tumbling_event_time_sum_per_key_emits_each_closed_window_once(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    src, sink, query = unique("sdk-tumb-src"), unique("sdk-tumb-sink"), unique("sdk-tumb")
    # Two keys in one partition; 1 s windows; the last event (ts 3500) closes windows 0-2.
    rows = [
        {"k": "a", "v": 1, "ts": BASE + 100},
        {"k": "b", "v": 10, "ts": BASE + 200},
        {"k": "a", "v": 2, "ts": BASE + 900},
        {"k": "a", "v": 4, "ts": BASE + 1100},
        {"k": "b", "v": 20, "ts": BASE + 2500},
        {"k": "a", "v": 8, "ts": BASE + 3500},
    ]

    async def body(client: Queen) -> None:
        await push(client, src, "p1", rows)
        stream = (
            Stream.from_(client.queue(src))
            .key_by(lambda m: m["data"]["k"])
            .window_tumbling(seconds=1, event_time=event_time, idle_flush_ms=0)
            .aggregate({"sum": lambda d: d["v"], "count": lambda d: 1})
            .map(labelled)
            .to(client.queue(sink))
        )

        async def check() -> None:
            out = await drain(client, sink, 4)
            got = sorted((o["key"], o["windowStart"] - BASE, o["sum"], o["count"]) for o in out)
            assert got == [("a", 0, 3, 2), ("a", 1000, 4, 1), ("b", 0, 10, 1), ("b", 2000, 20, 1)]
            assert await nothing_more(client, sink) == []

        await running(stream, query, client_server.url, check)

    client_run(body)
    # The open window (a, 3000) stays as state, with the partition's watermark.
    keys = state_keys(client_server.env["DATABASE_URL"], query)
    assert "__wm__" in keys and any(k.startswith("tumb:1\x1f") for k in keys), keys


def test_sliding_windows_count_each_event_in_every_window_it_falls_in(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    src, sink, query = unique("sdk-slide-src"), unique("sdk-slide-sink"), unique("sdk-slide")
    # 2 s windows every 1 s: each event is in two windows; the event at 10 s closes them.
    rows = [
        {"v": 1, "ts": BASE + 500},
        {"v": 2, "ts": BASE + 1500},
        {"v": 4, "ts": BASE + 2500},
        {"v": 0, "ts": BASE + 10_000},
    ]

    async def body(client: Queen) -> None:
        await push(client, src, "p1", rows)
        stream = (
            Stream.from_(client.queue(src))
            .window_sliding(size=2, slide=1, event_time=event_time, idle_flush_ms=0)
            .aggregate({"sum": lambda d: d["v"]})
            .map(labelled)
            .to(client.queue(sink))
        )

        async def check() -> None:
            out = await drain(client, sink, 4)
            got = sorted((o["windowStart"] - BASE, o["sum"]) for o in out)
            assert got == [(-1000, 1), (0, 3), (1000, 6), (2000, 4)]
            assert await nothing_more(client, sink) == []

        await running(stream, query, client_server.url, check)

    client_run(body)


def test_session_window_closes_when_the_gap_is_exceeded(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    """The SDK runs a batch's events through the session window in its order (createdAt,
    then id as a string): the rows' order, as message ids have 15 digits (migration 0025;
    with ids 98..103 it saw 5 s before 0 s and closed other sessions)."""
    src, sink, query = unique("sdk-sess-src"), unique("sdk-sess-sink"), unique("sdk-sess")
    # Key u: 0, 0.5 s, 1.2 s are one session (gaps <= 1 s); 5 s starts the next one.
    rows = [
        {"k": "u", "v": 1, "ts": BASE},
        {"k": "u", "v": 2, "ts": BASE + 500},
        {"k": "w", "v": 100, "ts": BASE + 600},
        {"k": "u", "v": 4, "ts": BASE + 1200},
        {"k": "u", "v": 8, "ts": BASE + 5000},
        {"k": "w", "v": 0, "ts": BASE + 5000},
    ]

    async def body(client: Queen) -> None:
        await push(client, src, "p1", rows)
        stream = (
            Stream.from_(client.queue(src))
            .key_by(lambda m: m["data"]["k"])
            .window_session(gap=1, event_time=event_time, idle_flush_ms=0)
            .aggregate({"sum": lambda d: d["v"], "count": lambda d: 1})
            .map(labelled)
            .to(client.queue(sink))
        )

        async def check() -> None:
            out = await drain(client, sink, 2)
            got = sorted((o["key"], o["windowStart"] - BASE, o["sum"], o["count"]) for o in out)
            assert got == [("u", 0, 7, 3), ("w", 600, 100, 1)]
            assert await nothing_more(client, sink) == []

        await running(stream, query, client_server.url, check)

    client_run(body)
    open_sessions = [k for k in state_keys(client_server.env["DATABASE_URL"], query) if "open" in k]
    assert len(open_sessions) == 2  # u and w, both started at 5 s


def test_cron_window_aggregates_per_calendar_minute(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    src, sink, query = unique("sdk-cron-src"), unique("sdk-cron-sink"), unique("sdk-cron")
    rows = [
        {"v": 1, "ts": BASE + 1_000},
        {"v": 2, "ts": BASE + 59_000},
        {"v": 4, "ts": BASE + 61_000},
        {"v": 0, "ts": BASE + 300_000},
    ]

    async def body(client: Queen) -> None:
        await push(client, src, "p1", rows)
        stream = (
            Stream.from_(client.queue(src))
            .window_cron(every="minute", event_time=event_time, idle_flush_ms=0)
            .aggregate({"sum": lambda d: d["v"]})
            .map(labelled)
            .to(client.queue(sink))
        )

        async def check() -> None:
            out = await drain(client, sink, 2)
            assert sorted((o["windowStart"] - BASE, o["sum"]) for o in out) == [(0, 3), (60_000, 4)]
            assert await nothing_more(client, sink) == []

        await running(stream, query, client_server.url, check)

    client_run(body)


def test_event_time_grace_and_lateness_keep_out_of_order_events_and_drop_late_ones(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    """One message per cycle (batch 1), so the watermark moves between them: it trails the
    newest event by the allowed lateness (1 s); a window closes once the watermark passes
    its end plus the grace period (1 s); an event older than the watermark is dropped."""
    src, sink, query = unique("sdk-grace-src"), unique("sdk-grace-sink"), unique("sdk-grace")
    rows = [
        {"v": 1, "ts": BASE + 100},
        {"v": 2, "ts": BASE + 1500},  # watermark 500
        {"v": 4, "ts": BASE + 800},  # out of order, above the watermark: counted
        {"v": 8, "ts": BASE + 3000},  # watermark 2000: window 0 closes (1000 + grace)
        {"v": 16, "ts": BASE + 200},  # below the watermark: dropped
        {"v": 0, "ts": BASE + 9000},  # watermark 8000: closes windows 1 and 3
    ]

    async def body(client: Queen) -> None:
        await push(client, src, "p1", rows)
        stream = (
            Stream.from_(client.queue(src))
            .window_tumbling(
                seconds=1,
                grace_period=1,
                allowed_lateness=1,
                event_time=event_time,
                idle_flush_ms=0,
            )
            .aggregate({"sum": lambda d: d["v"]})
            .map(labelled)
            .to(client.queue(sink))
        )

        async def check() -> None:
            out = await drain(client, sink, 3)
            got = sorted((o["windowStart"] - BASE, o["sum"]) for o in out)
            assert got == [(0, 5), (1000, 2), (3000, 8)]
            assert await nothing_more(client, sink) == []

        await running(stream, query, client_server.url, check, batch_size=1, max_partitions=1)

    client_run(body)


def test_idle_flush_emits_a_quiet_partitions_window_once_its_time_has_passed(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    """Processing time: no later message closes the window; the flush timer does."""
    src, sink, query = unique("sdk-flush-src"), unique("sdk-flush-sink"), unique("sdk-flush")

    async def body(client: Queen) -> None:
        await push(client, src, "p1", [{"v": 1}, {"v": 2}, {"v": 4}])
        stream = (
            Stream.from_(client.queue(src))
            .window_tumbling(seconds=1, idle_flush_ms=200)
            .aggregate({"sum": lambda d: d["v"], "count": lambda d: 1})
            .to(client.queue(sink))
        )

        async def check() -> None:
            out = await drain(client, sink, 1)
            assert [(o["sum"], o["count"]) for o in out] == [(7, 3)]
            assert await nothing_more(client, sink, wait_ms=600) == []

        await running(stream, query, client_server.url, check)

    client_run(body)
    assert state_keys(client_server.env["DATABASE_URL"], query) == []


def test_idle_flush_closes_a_window_of_three_single_pushes(
    client_run: ClientRun, client_server: ServerProcess, unique: Callable[[str], str]
) -> None:
    """The 0.15.0 SDK suite's own idle-flush case (issue 42): three single pushes (three
    requests, three `createdAt`s) to one partition, a 1 s tumbling window flushed after
    700 ms idle, batches of 50: one window holding all three (count 3, sum 21), closed by
    the flush timer, as no later message closes it; on the session's shared server, after
    whatever the other tests of this process left there.

    The window is the second of each message's `createdAt` (processing time). Pushes that
    straddle a second's boundary put the first message in a window of its own, which the
    batch's later messages close at once: count 1, sum 7, no flush cycle, on any server
    (the original too), which is what the issue saw. So the pushes start early in a
    second: they take tens of milliseconds, and a push slow enough to cross it is what
    this test exists to catch."""
    src, sink, query = unique("sdk-quiet-src"), unique("sdk-quiet-sink"), unique("sdk-quiet")

    async def body(client: Queen) -> None:
        await client.queue(src).create()
        into_second = time.time() % 1.0
        if into_second > 0.3:  # a wall-clock boundary, not an event: nothing to await
            await asyncio.sleep(1.0 - into_second)
        for _ in range(3):
            await client.queue(src).partition("quiet").push([{"data": {"v": 7}}])
        stream = (
            Stream.from_(client.queue(src))
            .window_tumbling(seconds=1, idle_flush_ms=700)
            .aggregate({"count": lambda d: 1, "sum": lambda d: d["v"]})
            .to(client.queue(sink))
        )

        async def check() -> None:
            out = await drain(client, sink, 1)
            assert [(o["count"], o["sum"]) for o in out] == [(3, 21)]
            assert await nothing_more(client, sink, wait_ms=800) == []

        await running(stream, query, client_server.url, check, batch_size=50, reset=True)

    client_run(body)
    assert state_keys(client_server.env["DATABASE_URL"], query) == []
