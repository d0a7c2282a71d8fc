"""(g) end-to-end latency: producers at a fixed rate, long-polling consumers, push 201 to
arrival; then the highest fixed rate whose p99 stays within a limit (a step search)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson

from bench.common import BenchError, Context, Figure, RunResult, check_pushed, configure, log, now
from bench.e2e_flow import (
    Books,
    Producer,
    all_or_none,
    consumer,
    latency_stats,
    settle,
    stop,
)
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.stats import percentile

POLL_TIMEOUT_MS = 5000
GRACE_S = 5.0  # a message not received after consumers saw nothing for this long is lost
WARMUP_LIMIT_S = 30.0
RATE_KEPT = 0.95  # a window whose achieved push rate is below this share of its target fails
TARGET_P50_MS, TARGET_P99_MS = 5, 50  # issue 16, at 1,000 msg/s


def e2e_figures(sizes: Sizes) -> list[Figure]:
    at = f"{sizes.e2e_rate:,.0f} msg/s, {sizes.e2e_duration_s:g} s"
    return [
        Figure("p50_ms", f"{at}: latency p50 (target <= {TARGET_P50_MS} ms)", "ms"),
        Figure("p99_ms", f"{at}: latency p99 (target <= {TARGET_P99_MS} ms)", "ms"),
        Figure("max_ms", f"{at}: latency max", "ms"),
        Figure("achieved_rate", f"{at}: push rate achieved", "msg/s"),
        Figure("pushed", f"{at}: pushed (201 read)", "msgs"),
        Figure("received", f"{at}: received", "msgs"),
        Figure("lost", f"{at}: lost (fails the scenario)", "msgs"),
        Figure("duplicated", f"{at}: duplicated (fails the scenario)", "msgs"),
        Figure("negative", f"{at}: received before their 201 (counted as 0 ms)", "msgs"),
        Figure(
            "max_rate",
            f"highest fixed rate with p99 <= {sizes.e2e_step_limit_ms:g} ms (steps of "
            f"{sizes.e2e_rate:,.0f} msg/s, {sizes.e2e_step_s:g} s each)",
            "msg/s",
        ),
    ]


def passes(stats: dict[str, Any], rate: float, limit_ms: float) -> bool:
    """A window holds its rate when p99 is within the limit and the rate was achieved."""
    p99 = stats.get("p99_ms")
    return p99 is not None and p99 <= limit_ms and stats["achieved_rate"] >= RATE_KEPT * rate


def render_pushes(ctx: Context, queue: str, partition: str, count: int) -> list[tuple[str, bytes]]:
    """Single-message pushes, rendered before the window (the load generator stays light)."""
    return render_pushes_to(ctx, queue, [partition] * count)


def render_pushes_to(ctx: Context, queue: str, partitions: list[str]) -> list[tuple[str, bytes]]:
    """One single-message push per entry of `partitions` (to that partition), in order."""
    render = Connection(ctx.endpoint).render
    out = []
    for seq, partition in enumerate(partitions):
        items = ctx.items(queue, partition, seq, 1)
        body = orjson.dumps({"items": items})
        out.append((items[0]["transactionId"], render("POST", "/api/v1/push", body)))
    return out


async def prepare(ctx: Context, queue: str, partitions: list[str]) -> None:
    """Configure the queue and create its partitions (one warm-up message each)."""
    (setup,) = await ctx.connect(1)
    try:
        await configure(setup, queue)
        for p in partitions:
            body = orjson.dumps({"items": ctx.items(queue, p, -1, 1)})
            raw = setup.render("POST", "/api/v1/push", body)
            check_pushed(await setup.request_raw(raw, "POST"), 1, "(g) warm-up push")
    finally:
        await setup.close()


async def until_ready(books: Books, consumers: list[asyncio.Task[None]], warmups: int) -> None:
    """The warm-up messages are consumed: the consumers' polls are waiting."""
    ready_by = now() + WARMUP_LIMIT_S
    while len(books.received) < warmups and not any(t.done() for t in consumers):
        if now() > ready_by:
            raise BenchError(f"(g) warm-up messages not received in {WARMUP_LIMIT_S:g} s")
        await asyncio.sleep(0.02)
    for t in consumers:
        if t.done():
            t.result()  # a consumer failed: its error, now
    await asyncio.sleep(0.2)


Window = tuple[dict[str, Any], dict[str, float | None]]


async def window(ctx: Context, label: str, rate: float, seconds: float, measured: bool) -> Window:
    """One window at `rate` msg/s for `seconds`: latency stats (and CPU when `measured`)."""
    s = ctx.sizes
    queue = ctx.queue("g", label)
    partitions = [f"p{i}" for i in range(s.e2e_producers)]
    per_producer = rate / len(partitions)
    count = max(1, round(per_producer * seconds))
    plan = [render_pushes(ctx, queue, p, count) for p in partitions]
    await prepare(ctx, queue, partitions)
    books = Books()
    producers = [Producer(ctx.endpoint, reqs, per_producer, books) for reqs in plan]
    conns = await ctx.connect(s.e2e_consumers)
    pop = conns[0].render(
        "GET", ctx.pop_path(queue, batch=s.e2e_batch, wait="true", timeout=POLL_TIMEOUT_MS)
    )
    consumers = [asyncio.create_task(consumer(c, pop, books)) for c in conns]
    start = now()
    try:
        await until_ready(books, consumers, len(partitions))
        meter: contextlib.AbstractAsyncContextManager[dict[str, float | None]]
        meter = ctx.measure(f"g-{label}") if measured else contextlib.nullcontext({})
        async with meter as cpu:
            start = now() + 0.05
            await all_or_none([p.run(start) for p in producers])
        await settle(books, GRACE_S)
    finally:
        await stop(consumers)
        await close_all(conns)
    stats = latency_stats(books.acked, books.received)
    last = max(books.acked.values(), default=start)
    stats |= {
        "rate": rate,
        "seconds": seconds,
        "achieved_rate": round(len(books.acked) / max(seconds, last - start), 1),
        "duplicated": books.duplicates,
        "pops": books.pops,
        "empty_pops": books.empty_pops,
        "send_lag_ms_p99": round(percentile(books.lags, 99) * 1000, 2) if books.lags else None,
        "producer_connections": [len(p.conns) for p in producers],
    }
    log(f"(g) {label}: {rate:,.0f} msg/s for {seconds:g} s: {stats}")
    if stats["lost"] or stats["duplicated"]:
        raise BenchError(
            f"(g) {label}: {stats['lost']} message(s) lost, {stats['duplicated']} duplicated"
        )
    return stats, cpu


async def search(ctx: Context, run: int, first: dict[str, Any]) -> tuple[float, list[Any]]:
    """Rates e2e_rate, 2x, 3x... (the first is the main window): the last that passes."""
    s = ctx.sizes
    best, steps = 0.0, [{"rate": s.e2e_rate, "main_window": True, **_step(first)}]
    rate = s.e2e_rate
    ok = passes(first, rate, s.e2e_step_limit_ms)
    for _ in range(s.e2e_max_steps):
        if not ok:
            break
        best, rate = rate, rate + s.e2e_rate
        stats, _ = await window(ctx, f"r{run}-{rate:.0f}", rate, s.e2e_step_s, False)
        steps.append({"rate": rate, **_step(stats)})
        ok = passes(stats, rate, s.e2e_step_limit_ms)
    return best, steps


def _step(stats: dict[str, Any]) -> dict[str, Any]:
    keys = ("p50_ms", "p99_ms", "max_ms", "achieved_rate", "pushed", "negative")
    return {k: stats.get(k) for k in keys}


async def end_to_end(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    stats, cpu = await window(ctx, f"r{run}", s.e2e_rate, s.e2e_duration_s, True)
    best, steps = await search(ctx, run, stats)
    keys = [f.key for f in e2e_figures(s)]
    figures = {k: float(stats[k]) for k in keys if stats.get(k) is not None}
    figures["max_rate"] = best
    log(f"(g) run {run + 1}: p50 {figures.get('p50_ms')} ms, p99 {figures.get('p99_ms')} ms, "
        f"highest rate with p99 <= {s.e2e_step_limit_ms:g} ms: {best:,.0f} msg/s")  # fmt: skip
    return RunResult(
        figures, {k: cpu for k in figures if k != "max_rate"}, {**stats, "steps": steps}
    )
