"""(n) partitions scaling (issue 31, part 1): what one pop + ack costs as a queue's partition
count grows, with 1 message in each of N partitions and one sequential consumer.

For each N and each way of popping (queue mode, a consumer group, a namespace/task pop) a
queue of its own is filled with one message per partition, many partitions per push
request. The consumer then runs up to `scaling_cycles` cycles of pop (batch 1, no wait) +
ack, timed together (a size whose cycles are slow stops after `scaling_max_s`, with at
least MIN_CYCLES cycles). A queue smaller than the cycle count is refilled (one message per
partition, untimed) each time it has been drained, so that every size gets the same number
of samples. Only the public HTTP API is used, so the scenario runs against any server.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson

from bench.common import BenchError, Context, Figure, RunResult, check_pushed, expect, log, now
from bench.consume import ack_messages
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.stats import percentile

MODES = ("queue", "group", "namespace")
GROUP = "bench-group"
TASK = "work"
WARMUP_CYCLES = 3  # untimed cycles before the timed ones (connection, first plans)
MIN_CYCLES = 20  # timed cycles a size gets even beyond its time budget
FILL_PARALLEL = 2


@dataclass(frozen=True)
class Target:
    """One queue of the scenario and how its consumer pops it."""

    mode: str
    queue: str
    namespace: str | None

    @property
    def group(self) -> str | None:
        return GROUP if self.mode == "group" else None

    def pop_path(self) -> str:
        if self.mode == "namespace":
            assert self.namespace is not None
            return f"/api/v1/pop?namespace={quote(self.namespace, safe='')}&task={TASK}&batch=1"
        path = f"/api/v1/pop/queue/{quote(self.queue, safe='')}?batch=1"
        return path + (f"&consumerGroup={GROUP}" if self.group else "")

    def configure_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"queue": self.queue, "options": {}}
        if self.namespace is not None:
            body |= {"namespace": self.namespace, "task": TASK}
        return body


def fill_bodies(ctx: Context, queue: str, partitions: int, per_request: int) -> list[bytes]:
    """Push bodies putting 1 message in each of partitions p0..p{n-1}, `per_request` a body."""
    bodies = []
    for first in range(0, partitions, per_request):
        items = [
            ctx.items(queue, f"p{p}", 0, 1)[0]
            for p in range(first, min(partitions, first + per_request))
        ]
        bodies.append(orjson.dumps({"items": items}))
    return bodies


async def fill(ctx: Context, queue: str, partitions: int) -> float:
    """Fill the queue (1 message per partition); seconds it took."""
    bodies = fill_bodies(ctx, queue, partitions, ctx.sizes.scaling_fill_batch)
    counts = [len(orjson.loads(b)["items"]) for b in bodies]
    jobs = list(zip(bodies, counts, strict=True))
    conns = await ctx.connect(min(FILL_PARALLEL, len(jobs)))
    started = now()

    async def worker(conn: Connection) -> None:
        while jobs:
            body, count = jobs.pop()
            raw = conn.render("POST", "/api/v1/push", body)
            check_pushed(await conn.request_raw(raw, "POST"), count, "(n) fill push")

    try:
        await asyncio.gather(*(worker(c) for c in conns))
    finally:
        await close_all(conns)
    return now() - started


def analyze(ctx: Context) -> None:
    """Fresh planner statistics for the tables a pop reads (--scaling-analyze): the
    server's cached plans made while the queue was small are then made again."""
    import psycopg2

    if not ctx.target.dsn:
        raise BenchError("(n) --scaling-analyze needs the database (--database-url)")
    with psycopg2.connect(ctx.target.dsn) as conn:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("ANALYZE queen.partitions, queen.messages, queen.partition_consumers")


def table_scans(ctx: Context, label: str) -> dict[str, Any]:
    """Sequential scans of the window `label` (the wait sampler's), by table."""
    scans = ctx.pg_waits.get(label, {}).get("table_scans") or []
    return {s["table"]: [s["seq_scans"], s["seq_rows_read"]] for s in scans}


def cycle_budget(done: int, wanted: int, late: bool) -> bool:
    """Whether to run one more timed cycle: `wanted` in all, fewer (at least MIN_CYCLES
    after the warm-up) once the size's time budget is spent (`late`)."""
    if done >= wanted:
        return False
    return not late or done < WARMUP_CYCLES + MIN_CYCLES


async def one_cycle(conn: Connection, pop_raw: bytes, group: str | None) -> float:
    """One pop (batch 1) + ack: ms. The queue must have a message ready."""
    started = now()
    response = await conn.request_raw(pop_raw)
    messages = expect(response, 200, "(n) pop").json().get("messages") or []
    messages = [m for m in messages if m]
    if len(messages) != 1:
        raise BenchError(f"(n) pop carried {len(messages)} messages, wanted 1")
    await ack_messages(conn, messages, group, started)
    return (now() - started) * 1000


async def measure_size(
    ctx: Context, target: Target, partitions: int, label: str
) -> tuple[dict[str, Any], dict[str, float | None]]:
    """Fill, then time the cycles (CPU measured around them, refills included): latency
    stats of this size and mode, and the CPU window."""
    (conn,) = await ctx.connect(1)
    try:
        expect(
            await conn.request("POST", "/api/v1/configure", target.configure_body()),
            (200, 201),
            "(n) configure",
        )
        fill_s = await fill(ctx, target.queue, partitions)
        if ctx.sizes.scaling_analyze:
            await asyncio.to_thread(analyze, ctx)
        pop_raw = conn.render("GET", target.pop_path())
        times: list[float] = []
        refill_s = 0.0
        wanted = ctx.sizes.scaling_cycles + WARMUP_CYCLES
        budget_ends = now() + ctx.sizes.scaling_max_s
        left, refills = partitions, 0  # messages left in the queue
        async with ctx.measure(label) as cpu:
            while cycle_budget(len(times), wanted, now() > budget_ends):
                if not left:  # drained: 1 message per partition again (untimed)
                    refill_s += await fill(ctx, target.queue, partitions)
                    left, refills = partitions, refills + 1
                times.append(await one_cycle(conn, pop_raw, target.group))
                left -= 1
    finally:
        await conn.close()
    timed = times[WARMUP_CYCLES:]
    stats = {
        "p50_ms": round(percentile(timed, 50), 3),
        "p99_ms": round(percentile(timed, 99), 3),
        "max_ms": round(max(timed), 3),
        "cycles": len(timed),
        "fill_s": round(fill_s, 2),
        "fill_partitions_per_s": round(partitions / fill_s) if fill_s > 0 else None,
        "refills": refills,
        "refill_s": round(refill_s, 2),
        "seq_scans": table_scans(ctx, label),
        "analyzed": ctx.sizes.scaling_analyze,
        "cpu_ms_per_cycle": cpu_per_cycle(cpu, len(times)),
    }
    return stats, cpu


def cpu_per_cycle(cpu: dict[str, float | None], cycles: int) -> float | None:
    """Server + PostgreSQL CPU milliseconds per cycle (warm-up and refills included): less
    sensitive than the latency to other work on a shared machine."""
    seconds = cpu.get("seconds")
    parts = [cpu.get("server"), cpu.get("postgres")]
    if seconds is None or not cycles or all(p is None for p in parts):
        return None
    return round(sum(p or 0.0 for p in parts) / 100 * seconds / cycles * 1000, 3)


def scaling_figures(sizes: Sizes) -> list[Figure]:
    c = sizes.scaling_cycles
    out = []
    for mode in sizes.scaling_modes:
        for n in sizes.scaling_partitions:
            at = f"{mode}, {n:,} partitions, pop+ack per cycle (up to {c} cycles)"
            out += [Figure(f"{mode}_{n}_p50", f"{at}: p50", "ms"),
                    Figure(f"{mode}_{n}_p99", f"{at}: p99", "ms"),
                    Figure(f"{mode}_{n}_cpu", f"{at}: server + PostgreSQL CPU", "ms")]  # fmt: skip
        if len(sizes.scaling_partitions) > 1:
            low, high = min(sizes.scaling_partitions), max(sizes.scaling_partitions)
            out.append(Figure(f"{mode}_ratio", f"{mode}: p50 at {high:,} / p50 at {low:,}", "x"))
    return out


def ratio(figures: dict[str, float], mode: str, sizes: Sizes) -> float | None:
    low, high = min(sizes.scaling_partitions), max(sizes.scaling_partitions)
    a, b = figures.get(f"{mode}_{low}_p50"), figures.get(f"{mode}_{high}_p50")
    return round(b / a, 2) if a and b is not None else None


async def partitions_scaling(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    figures: dict[str, float] = {}
    cpu: dict[str, dict[str, float | None]] = {}
    extra: dict[str, Any] = {}
    for n in s.scaling_partitions:
        for mode in s.scaling_modes:
            queue = ctx.queue("n", f"r{run}-{n}-{mode}")
            namespace = f"{queue}-ns" if mode == "namespace" else None
            target = Target(mode, queue, namespace)
            stats, window = await measure_size(ctx, target, n, f"n-r{run}-{n}-{mode}")
            figures[f"{mode}_{n}_p50"] = stats["p50_ms"]
            figures[f"{mode}_{n}_p99"] = stats["p99_ms"]
            if stats["cpu_ms_per_cycle"] is not None:
                figures[f"{mode}_{n}_cpu"] = stats["cpu_ms_per_cycle"]
            cpu[f"{mode}_{n}_p50"] = cpu[f"{mode}_{n}_p99"] = window
            extra[f"{mode}_{n}"] = stats
            log(f"(n) run {run + 1}: {mode}, {n:,} partitions: {stats}")
    if len(s.scaling_partitions) > 1:
        for mode in s.scaling_modes:
            value = ratio(figures, mode, s)
            if value is not None:
                figures[f"{mode}_ratio"] = value
    log(f"(n) run {run + 1}: ratios " + ", ".join(
        f"{m} {figures.get(f'{m}_ratio')}" for m in s.scaling_modes))  # fmt: skip
    return RunResult(figures, cpu, extra)
