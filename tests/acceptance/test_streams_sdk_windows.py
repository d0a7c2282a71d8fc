"""The official 0.15.0 client's streaming SDK (`queen.Stream`) on the real server: the
window kinds (tumbling, sliding, session, cron), event time with a grace period, the idle
flush, the stateless operators, and recovery with `reset`. Each pipeline's output is read
from its sink queue with long polls, and compared with what the input must give."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queen import Queen, Stream

from tests.acceptance.conftest import ClientRun
from tests.acceptance.sdk_support import drain, nothing_more, running, state_keys
from tests.support.server import ServerProcess

BASE = 1_700_000_000_000  # event times (ms), on a minute boundary


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
