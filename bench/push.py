"""(a) batched push, 1000 messages per request, (b) single-message push: throughput; and
(i) the cost of JWT authentication on (b)."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.common import (
    BenchError,
    Context,
    Figure,
    RunResult,
    check_pushed,
    log,
    now,
    worker_spread,
)
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.stats import percentile, rate


async def push_for(
    ctx: Context, conns: list[Connection], queue: str, batch: int, seconds: float
) -> dict[str, Any]:
    """Every connection pushes `batch`-item requests back to back for `seconds`."""
    started = now()
    end = started + seconds
    latencies: list[float] = []
    seq = 0

    parts = ctx.sizes.push_partitions

    async def worker(index: int, conn: Connection) -> tuple[int, float]:
        nonlocal seq
        pushed, last = 0, started
        partition = "Default" if parts == 1 else f"p{index % parts}"
        while now() < end:
            body = ctx.push_body(queue, partition, seq, batch)
            seq += batch
            raw = conn.render("POST", "/api/v1/push", body)
            sent = now()
            response = await conn.request_raw(raw, "POST")
            last = now()
            check_pushed(response, batch)
            latencies.append(last - sent)
            pushed += batch
        return pushed, last

    done = await asyncio.gather(*(worker(i, c) for i, c in enumerate(conns)))
    elapsed = max(last for _, last in done) - started
    messages = sum(n for n, _ in done)
    return {
        "messages": messages,
        "requests": len(latencies),
        "seconds": round(elapsed, 3),
        "msg_per_s": rate(messages, elapsed),
        "req_per_s": rate(len(latencies), elapsed),
        "latency_ms_p50": round(percentile(latencies, 50) * 1000, 2) if latencies else None,
        "latency_ms_p99": round(percentile(latencies, 99) * 1000, 2) if latencies else None,
    }


async def push_throughput(
    ctx: Context, scenario: str, label: str, connections: int, batch: int
) -> tuple[dict[str, Any], dict[str, float | None]]:
    queue = ctx.queue(scenario, label)
    conns = await ctx.connect(connections)
    try:
        spread = await worker_spread(conns)
        await push_for(ctx, conns, queue, batch, ctx.sizes.warmup_s)
        async with ctx.measure(f"{scenario}-{label}") as cpu:
            result = await push_for(ctx, conns, queue, batch, ctx.sizes.duration_s)
    finally:
        await close_all(conns)
    result["connections_per_worker"] = spread
    return result, cpu


def _partitions(sizes: Sizes) -> str:
    return f", {sizes.push_partitions} partitions" if sizes.push_partitions > 1 else ""


def batched_figures(sizes: Sizes) -> list[Figure]:
    return [
        Figure(
            f"clients_{n}",
            f"{sizes.push_batch} msg/request, {n} client{'s' * (n > 1)}{_partitions(sizes)}",
            "msg/s",
        )
        for n in sizes.push_clients
    ]


async def batched(ctx: Context, run: int) -> RunResult:
    result = RunResult()
    for n in ctx.sizes.push_clients:
        key = f"clients_{n}"
        stats, cpu = await push_throughput(ctx, "a", f"{n}c-r{run}", n, ctx.sizes.push_batch)
        result.figures[key] = stats["msg_per_s"]
        result.cpu[key] = cpu
        result.extra[key] = stats
        log(
            f"(a) run {run + 1}: {n} client(s): {stats['msg_per_s']:,.0f} msg/s "
            f"(connections per worker {stats['connections_per_worker']}), cpu {cpu}"
        )
    return result


def single_figures(sizes: Sizes) -> list[Figure]:
    return [
        Figure(f"connections_{n}", f"1 msg/request, {n} connections{_partitions(sizes)}", "req/s")
        for n in sizes.single_connections
    ]


async def single(ctx: Context, run: int) -> RunResult:
    result = RunResult()
    for n in ctx.sizes.single_connections:
        key = f"connections_{n}"
        stats, cpu = await push_throughput(ctx, "b", f"{n}c-r{run}", n, 1)
        result.figures[key] = stats["req_per_s"]
        result.cpu[key] = cpu
        result.extra[key] = stats
        log(
            f"(b) run {run + 1}: {n} connections: {stats['req_per_s']:,.0f} req/s "
            f"(connections per worker {stats['connections_per_worker']}), cpu {cpu}"
        )
    return result


def auth_figures(sizes: Sizes) -> list[Figure]:
    out = []
    for n in sizes.single_connections:
        out += [
            Figure(f"off_{n}", f"1 msg/request, {n} connections, auth off", "req/s"),
            Figure(f"on_{n}", f"1 msg/request, {n} connections, JWT (HS256) on", "req/s"),
            Figure(f"ratio_{n}", f"{n} connections: auth on / auth off", "%"),
        ]
    return out


async def auth_cost(ctx: Context, run: int) -> RunResult:
    """(b) against two servers on one database, JWT off and on, back to back (the order
    alternates between runs, so that drift of the machine favours neither)."""
    twin = ctx.target.auth_twin
    if twin is None or twin.bearer_token is None:
        raise BenchError("(i) needs the servers the bench starts itself (no --url)")
    sides = [
        ("off", ctx.target, ""),
        ("on", twin, f"Authorization: Bearer {twin.bearer_token}\r\n"),
    ]
    if run % 2:
        sides.reverse()
    result = RunResult()
    for n in ctx.sizes.single_connections:
        for side, target, headers in sides:
            key = f"{side}_{n}"
            with ctx.against(target, headers):
                stats, cpu = await push_throughput(ctx, "i", f"{side}{n}c-r{run}", n, 1)
            result.figures[key] = stats["req_per_s"]
            result.cpu[key] = cpu
            result.extra[key] = stats
        ratio = result.figures[f"on_{n}"] / result.figures[f"off_{n}"] * 100
        result.figures[f"ratio_{n}"] = round(ratio, 1)
        log(
            f"(i) run {run + 1}: {n} connections: auth off {result.figures[f'off_{n}']:,.0f}, "
            f"on {result.figures[f'on_{n}']:,.0f} req/s ({ratio:.1f}%)"
        )
    return result
