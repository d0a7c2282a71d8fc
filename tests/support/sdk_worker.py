"""A streaming SDK worker in a process of its own, for the exactly-once acceptance test
(and the benchmark): the official client's `Stream` summing each source partition's
messages per 1 s tumbling window of event time (`data.ts`, ms) into a sink queue, each
output labelled with its key (the partition id) and window start.

    python -m tests.support.sdk_worker URL SOURCE SINK QUERY [BATCH] [PARTITIONS]

Runs until it is killed. Prints `ready` and the client's version once the query is
registered and its loop runs.
"""

from __future__ import annotations

import asyncio
import sys
from importlib.metadata import version
from typing import Any

from queen import Queen, Stream


def pipeline(client: Queen, source: str, sink: str) -> Stream:
    return (
        Stream.from_(client.queue(source))
        .window_tumbling(seconds=1, event_time=lambda m: m["data"]["ts"], idle_flush_ms=0)
        .aggregate({"sum": lambda d: d["v"], "count": lambda d: 1})
        .map(lambda agg, ctx: {**agg, "key": ctx["key"], "windowStart": ctx["windowStart"]})
        .to(client.queue(sink))
    )


async def main(url: str, source: str, sink: str, query: str, batch: int, parts: int) -> None:
    client = Queen(url=url)
    runner = await pipeline(client, source, sink).run(
        query_id=query,
        url=url,
        batch_size=batch,
        max_partitions=parts,
        max_wait_millis=500,
        on_error=lambda err, ctx: print("error", ctx.get("phase"), err, flush=True),
    )
    print(f"ready: queen-mq {version('queen-mq')}", flush=True)
    stop = asyncio.Event()
    try:
        await stop.wait()
    finally:
        await runner.stop()


if __name__ == "__main__":
    args: list[Any] = sys.argv[1:]
    batch = int(args[4]) if len(args) > 4 else 200
    parts = int(args[5]) if len(args) > 5 else 4
    asyncio.run(main(args[0], args[1], args[2], args[3], batch, parts))
