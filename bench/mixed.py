"""(x) mixed load and (y) its long run (issue 31, parts 3 and 4).

Producers (one keep-alive connection each, single-message pushes, producer i to partition
p{i}) are asked a total rate; long-polling consumers (batch 10, ack each batch) drain the
one queue. (x) steps through the asked rates, each on a fresh queue, and reports per step
the rate carried (messages received / production time), the latency from a push's 201 to
the consumer's receipt, lost and duplicated messages (tracked by transactionId) and the
CPU per message of the server, PostgreSQL and the load generator. The headline is the
highest rate carried with p99 within the limit (and nothing lost or duplicated). (y) holds
one rate for ten minutes and reports the server's memory (PSS summed over its processes)
in the first and the last minute. Only the public HTTP API: runs against any server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, overload

import orjson

from bench import procstat, servermetrics
from bench.common import Context, Figure, RunResult, log, now
from bench.e2e import prepare, until_ready
from bench.e2e_flow import Books, Producer, all_or_none, consumer, latency_stats, settle, stop
from bench.httpclient import Connection, close_all
from bench.options import Sizes

POLL_TIMEOUT_MS = 5000
GRACE_S = 5.0  # a message not received after consumers saw nothing for this long is lost
MEMORY_EVERY_S = 5.0
CPU_NAMES = ("server", "postgres", "loadgen")


class LazyPushes(Sequence[tuple[str, bytes]]):
    """`count` single-message pushes to one partition, rendered when first asked for (a
    ten-minute run would otherwise hold half a million requests in memory)."""

    def __init__(self, ctx: Context, queue: str, partition: str, count: int) -> None:
        self.ctx = ctx
        self.queue = queue
        self.partition = partition
        self.size = count
        self.render = Connection(ctx.endpoint).render

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, k: int) -> tuple[str, bytes]: ...
    @overload
    def __getitem__(self, k: slice) -> Sequence[tuple[str, bytes]]: ...
    def __getitem__(self, k: int | slice) -> Any:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self.size))]
        if not 0 <= k < self.size:
            raise IndexError(k)
        items = self.ctx.items(self.queue, self.partition, k, 1)
        return items[0]["transactionId"], self.render(
            "POST", "/api/v1/push", orjson.dumps({"items": items})
        )


def per_message_ms(cpu: dict[str, float | None], name: str, messages: int) -> float | None:
    """CPU milliseconds per message of one process tree over a measured window."""
    pct, seconds = cpu.get(name), cpu.get("seconds")
    if pct is None or seconds is None or messages <= 0:
        return None
    if name == "loadgen" and cpu.get("pg_sampler") is not None:
        pct += cpu["pg_sampler"] or 0.0  # the bench's own PostgreSQL backend
    return round(pct / 100 * seconds / messages * 1000, 4)


def carried_rate(books: Books, start: float, seconds: float) -> float:
    """Messages received (of those pushed) per second of production, or of the time until
    the last one arrived when the consumers fell behind."""
    arrivals = [books.received[t] for t in books.acked if t in books.received]
    if not arrivals:
        return 0.0
    return round(len(arrivals) / max(seconds, max(arrivals) - start), 1)


class MemoryTrack:
    """The server's PSS (all its processes) every few seconds, from a background task."""

    def __init__(self, root: int | None) -> None:
        self.root = root
        self.samples: list[tuple[float, int]] = []  # (bench time, kB)
        self.task: asyncio.Task[None] | None = None

    def start(self) -> MemoryTrack:
        if self.root is not None:
            self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        assert self.root is not None
        while True:
            kb = await asyncio.to_thread(procstat.tree_pss_kb, self.root)
            self.samples.append((now(), kb))
            await asyncio.sleep(MEMORY_EVERY_S)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    def mean_mb(self, since: float, until: float) -> float | None:
        values = [kb for at, kb in self.samples if since <= at <= until]
        return round(sum(values) / len(values) / 1024, 1) if values else None


async def load_window(
    ctx: Context, label: str, rate: float, seconds: float, memory: MemoryTrack | None = None
) -> tuple[dict[str, Any], dict[str, float | None]]:
    """One rate for `seconds` on a fresh queue: stats and the CPU window."""
    s = ctx.sizes
    queue = ctx.queue("x", label)
    partitions = [f"p{i}" for i in range(s.mixed_producers)]
    per_producer = rate / len(partitions)
    count = max(1, round(per_producer * seconds))
    await prepare(ctx, queue, partitions)
    books = Books()
    producers = [
        Producer(ctx.endpoint, LazyPushes(ctx, queue, p, count), per_producer, books, 1)
        for p in partitions
    ]
    conns = await ctx.connect(s.mixed_consumers)
    pop = conns[0].render(
        "GET", ctx.pop_path(queue, batch=s.mixed_batch, wait="true", timeout=POLL_TIMEOUT_MS)
    )
    consumers = [asyncio.create_task(consumer(c, pop, books)) for c in conns]
    (scraper,) = await ctx.connect(1)
    start = now()
    try:
        await until_ready(books, consumers, len(partitions))
        counted = await servermetrics.scrape(scraper)
        async with ctx.measure(f"x-{label}") as cpu:
            start = now() + 0.05
            if memory is not None:
                memory.start()
            try:
                await all_or_none([p.run(start) for p in producers])
            finally:
                if memory is not None:
                    await memory.stop()
            await settle(books, GRACE_S)
        counts = servermetrics.per_message(
            counted, await servermetrics.scrape(scraper), len(books.received)
        )
    finally:
        await stop(consumers)
        await close_all([*conns, scraper])
    stats = latency_stats(books.acked, books.received)
    received = stats["received"]
    stats |= {
        "asked": rate,
        "seconds": seconds,
        "carried": carried_rate(books, start, seconds),
        "duplicated": books.duplicates,
        "pops": books.pops,
        "empty_pops": books.empty_pops,
        **{f"{name}_cpu_ms_per_msg": per_message_ms(cpu, name, received) for name in CPU_NAMES},
        "server_counts_per_msg": counts,
    }
    return stats, cpu


def step_keys(rate: float) -> list[tuple[str, str, str]]:
    at = f"asked {rate:,.0f} msg/s"
    return [
        (f"r{rate:g}_carried", f"{at}: carried", "msg/s"),
        (f"r{rate:g}_p50", f"{at}: push 201 -> receipt p50", "ms"),
        (f"r{rate:g}_p99", f"{at}: push 201 -> receipt p99", "ms"),
        (f"r{rate:g}_server_cpu", f"{at}: server CPU per message", "ms"),
        (f"r{rate:g}_postgres_cpu", f"{at}: PostgreSQL CPU per message", "ms"),
        (f"r{rate:g}_loadgen_cpu", f"{at}: load generator CPU per message", "ms"),
        (f"r{rate:g}_lost", f"{at}: lost", "msgs"),
        (f"r{rate:g}_duplicated", f"{at}: duplicated", "msgs"),
    ]


def mixed_figures(sizes: Sizes) -> list[Figure]:
    shape = (
        f"{sizes.mixed_producers} producers + {sizes.mixed_consumers} long-polling consumers"
        f" (batch {sizes.mixed_batch})"
    )
    out = [
        Figure(
            "best_rate",
            f"{shape}: highest rate carried at p99 <= {sizes.mixed_p99_limit_ms:g} ms",
            "msg/s",
        )
    ]
    for rate in sizes.mixed_rates:
        out += [Figure(*k) for k in step_keys(rate)]
    out += [Figure("lost", "lost, all steps", "msgs"),
            Figure("duplicated", "duplicated, all steps", "msgs")]  # fmt: skip
    return out


def step_figures(rate: float, stats: dict[str, Any]) -> dict[str, float]:
    values = (stats.get("carried"), stats.get("p50_ms"), stats.get("p99_ms"),
              stats.get("server_cpu_ms_per_msg"), stats.get("postgres_cpu_ms_per_msg"),
              stats.get("loadgen_cpu_ms_per_msg"), stats.get("lost"),
              stats.get("duplicated"))  # fmt: skip
    keys = [key for key, _, _ in step_keys(rate)]
    return {key: float(v) for key, v in zip(keys, values, strict=True) if v is not None}


def best_rate(steps: list[dict[str, Any]], limit_ms: float) -> float:
    """The highest carried rate of a step with p99 within the limit and nothing lost or
    duplicated (0 when none qualifies)."""
    good = [
        s["carried"]
        for s in steps
        if s.get("p99_ms") is not None
        and s["p99_ms"] <= limit_ms
        and not s["lost"]
        and not s["duplicated"]
    ]
    return max(good, default=0.0)


async def mixed_load(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    figures: dict[str, float] = {}
    cpu: dict[str, dict[str, float | None]] = {}
    steps = []
    for rate in s.mixed_rates:
        stats, window = await load_window(ctx, f"r{run}-{rate:g}", rate, s.mixed_step_s)
        steps.append(stats)
        figures |= step_figures(rate, stats)
        for key, _, _ in step_keys(rate):
            cpu[key] = window
        log(f"(x) run {run + 1}: asked {rate:,.0f} msg/s: {stats}")
    figures["best_rate"] = best_rate(steps, s.mixed_p99_limit_ms)
    figures["lost"] = float(sum(st["lost"] for st in steps))
    figures["duplicated"] = float(sum(st["duplicated"] for st in steps))
    log(f"(x) run {run + 1}: highest rate carried at p99 <= {s.mixed_p99_limit_ms:g} ms: "
        f"{figures['best_rate']:,.0f} msg/s")  # fmt: skip
    return RunResult(figures, cpu, {"steps": steps})


def long_figures(sizes: Sizes) -> list[Figure]:
    at = f"{sizes.mixed_long_rate:,.0f} msg/s asked for {sizes.mixed_long_s:g} s"
    edge = f"{sizes.mixed_long_edge_s:g} s"
    return [
        Figure("carried", f"{at}: carried", "msg/s"),
        Figure("p50_ms", f"{at}: push 201 -> receipt p50", "ms"),
        Figure("p99_ms", f"{at}: push 201 -> receipt p99", "ms"),
        Figure("lost", f"{at}: lost", "msgs"),
        Figure("duplicated", f"{at}: duplicated", "msgs"),
        Figure("pss_first_mb", f"{at}: server PSS (all processes), first {edge}", "MB"),
        Figure("pss_last_mb", f"{at}: server PSS (all processes), last {edge}", "MB"),
        Figure("pss_growth_mb", f"{at}: server PSS, last - first", "MB"),
        Figure("server_cpu", f"{at}: server CPU per message", "ms"),
        Figure("postgres_cpu", f"{at}: PostgreSQL CPU per message", "ms"),
        Figure("loadgen_cpu", f"{at}: load generator CPU per message", "ms"),
    ]


async def mixed_long(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    memory = MemoryTrack(ctx.target.server_pid)
    stats, window = await load_window(
        ctx, f"long-r{run}", s.mixed_long_rate, s.mixed_long_s, memory
    )
    figures: dict[str, float] = {}
    for key, name in (("carried", "carried"), ("p50_ms", "p50_ms"), ("p99_ms", "p99_ms"),
                      ("lost", "lost"), ("duplicated", "duplicated"),
                      ("server_cpu", "server_cpu_ms_per_msg"),
                      ("postgres_cpu", "postgres_cpu_ms_per_msg"),
                      ("loadgen_cpu", "loadgen_cpu_ms_per_msg")):  # fmt: skip
        if stats.get(name) is not None:
            figures[key] = float(stats[name])
    if memory.samples:
        first_at, last_at = memory.samples[0][0], memory.samples[-1][0]
        first = memory.mean_mb(first_at, first_at + s.mixed_long_edge_s)
        last = memory.mean_mb(last_at - s.mixed_long_edge_s, last_at)
        if first is not None and last is not None:
            figures |= {"pss_first_mb": first, "pss_last_mb": last,
                        "pss_growth_mb": round(last - first, 1)}  # fmt: skip
    stats["pss_mb"] = [
        (round(at - memory.samples[0][0], 1), round(kb / 1024, 1)) for at, kb in memory.samples
    ]
    log(f"(y) run {run + 1}: {figures}")
    return RunResult(figures, {k: window for k in figures}, stats)
