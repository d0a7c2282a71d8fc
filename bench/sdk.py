"""(s) The official client's streaming SDK (docs/streams.md, "The SDK's API"): how many
source messages per second one SDK worker carries through a keyed tumbling aggregate to a
sink queue, with the latency of its cycle commits (`POST /streams/v1/cycle`: state, sink
pushes and source ack in one transaction), against raw pop + ack of the same messages by
one worker in the same run (the same queue shape, batch and partitions per pop).

The SDK runs in this process (the client's asyncio runtime), so its operator work shares
the load generator's CPU, as it would share a real worker's. Messages are prefilled before
each measurement; the SDK's pipeline is `key_by(seq % keys)`, 1 s tumbling windows of
event time (message `seq` of its partition at 10 ms apart: 100 messages per window and
partition, so windows close and their sums go to the sink as the run goes),
`aggregate(sum, count)`, `.to(sink)`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.common import BenchError, Context, Figure, RunResult, log, now, prefill
from bench.consume import Tally, consume, stall_limit
from bench.httpclient import close_all
from bench.options import Sizes
from bench.stats import percentile, rate

KEYS = 10  # distinct keys per source partition
EVENT_STEP_MS = 10  # event time between a partition's consecutive messages
CYCLE_PATH = "/streams/v1/cycle"


def sdk_figures(sizes: Sizes) -> list[Figure]:
    shape = (
        f"{sizes.sdk_messages:,} msgs, {sizes.sdk_partitions} partitions, "
        f"batch {sizes.sdk_batch}, {sizes.sdk_pop_partitions} partitions per pop"
    )
    return [
        Figure("sdk_msg_per_s", f"SDK: keyed 1 s tumbling sum to a sink, {shape}", "msg/s"),
        Figure("cycle_p50_ms", "SDK cycle commit p50", "ms"),
        Figure("cycle_p99_ms", "SDK cycle commit p99", "ms"),
        Figure("raw_msg_per_s", f"raw pop + ack/batch, one worker, {shape}", "msg/s"),
    ]


def timed_posts(
    post: Callable[[str, Any], Awaitable[Any]], path: str, seconds: list[float]
) -> Callable[[str, Any], Awaitable[Any]]:
    """`post` (the SDK's StreamsHttpClient.post) recording how long each call to `path`
    took, retries included, into `seconds`."""

    async def timed(target: str, body: Any) -> Any:
        if target != path:
            return await post(target, body)
        started = time.perf_counter()
        try:
            return await post(target, body)
        finally:
            seconds.append(time.perf_counter() - started)

    return timed


def latency_ms(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        raise BenchError("the SDK committed no cycle")
    ms = [s * 1000 for s in seconds]
    return {"cycle_p50_ms": percentile(ms, 50), "cycle_p99_ms": percentile(ms, 99)}


async def _sdk_run(ctx: Context, source: str, sink: str, query: str) -> dict[str, Any]:
    """Run the pipeline until every message is acked; its rate and cycle latencies."""
    import asyncio

    from queen import Queen, Stream

    s = ctx.sizes
    errors: list[str] = []
    cycles: list[float] = []
    client = Queen(url=ctx.target.url)
    stream = (
        Stream.from_(client.queue(source))
        .key_by(lambda m: m["data"]["seq"] % KEYS)
        .window_tumbling(
            seconds=1, idle_flush_ms=0, event_time=lambda m: m["data"]["seq"] * EVENT_STEP_MS
        )
        .aggregate({"sum": lambda d: d["seq"], "count": lambda d: 1})
        .to(client.queue(sink))
    )
    try:
        started = now()
        runner = await stream.run(
            query_id=query,
            url=ctx.target.url,
            batch_size=s.sdk_batch,
            max_partitions=s.sdk_pop_partitions,
            max_wait_millis=200,
            on_error=lambda err, where: errors.append(f"{where}: {err}"),
        )
        # Before the runner's loop takes its first step (it starts at the next await).
        runner.http.post = timed_posts(runner.http.post, CYCLE_PATH, cycles)
        deadline = started + stall_limit(s.sdk_messages)
        try:
            while runner.metrics()["messagesTotal"] < s.sdk_messages:
                if now() > deadline or len(errors) > 10:
                    raise BenchError(f"SDK stalled: {runner.metrics()} errors {errors[:3]}")
                await asyncio.sleep(0.02)
            elapsed = now() - started
        finally:
            await runner.stop()
        metrics = runner.metrics()
    finally:
        await client.close()
    return {
        "sdk_msg_per_s": rate(s.sdk_messages, elapsed),
        **latency_ms(cycles),
        "extra": {
            "seconds": round(elapsed, 3),
            "cycles": metrics["cyclesTotal"],
            "pushed": metrics["pushItemsTotal"],
            "errors": errors[:5],
        },
    }


async def _raw_run(ctx: Context, queue: str) -> tuple[float, dict[str, Any]]:
    """One worker popping `sdk_batch` messages of up to `sdk_pop_partitions` partitions and
    acking each batch: the SDK's source traffic without its operators and state."""
    s = ctx.sizes
    tally = Tally()
    [conn] = await ctx.connect(1)
    path = ctx.pop_path(
        queue, batch=s.sdk_batch, partitions=s.sdk_pop_partitions, consumerGroup="raw"
    )
    try:
        started = now()
        await consume(conn, path, "raw", tally, lambda: len(tally.seen) >= s.sdk_messages)
        elapsed = now() - started
    finally:
        await close_all([conn])
    return rate(len(tally.seen), elapsed), {"seconds": round(elapsed, 3), **tally.as_dict()}


async def sdk_pipeline(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    source, raw = ctx.queue("s", f"src-r{run}"), ctx.queue("s", f"raw-r{run}")
    await prefill(ctx, source, s.sdk_messages, s.sdk_partitions)
    await prefill(ctx, raw, s.sdk_messages, s.sdk_partitions)
    async with ctx.measure(f"s-sdk-r{run}") as sdk_cpu:
        sdk = await _sdk_run(ctx, source, ctx.queue("s", f"sink-r{run}"), f"bench.{ctx.tag}.r{run}")
    async with ctx.measure(f"s-raw-r{run}") as raw_cpu:
        raw_rate, raw_extra = await _raw_run(ctx, raw)
    extra = sdk.pop("extra")
    figures = {**sdk, "raw_msg_per_s": raw_rate}
    log(
        f"(s) run {run + 1}: SDK {figures['sdk_msg_per_s']:,.0f} msg/s, cycle p50 "
        f"{figures['cycle_p50_ms']:.1f} ms p99 {figures['cycle_p99_ms']:.1f} ms; raw pop+ack "
        f"{raw_rate:,.0f} msg/s; sdk {extra}, raw {raw_extra}"
    )
    cpu = {"sdk_msg_per_s": sdk_cpu, "raw_msg_per_s": raw_cpu}
    return RunResult(figures, cpu, {"sdk": extra, "raw": raw_extra})
