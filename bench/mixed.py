"""(x) mixed load (issue 31, part 3).

Producers (one keep-alive connection each, single-message pushes, producer i to partition
p{i}) are asked a total rate; long-polling consumers (batch 10, ack each batch) drain the
one queue. (x) steps through the asked rates, each on a fresh queue, and reports per step
the rate carried (messages received / production time), the latency from a push's 201 to
the consumer's receipt, lost and duplicated messages (tracked by transactionId) and the
CPU per message of the server, PostgreSQL and the load generator. The headline is the
highest rate carried with p99 within the limit (and nothing lost or duplicated). (y) holds
one rate for ten minutes (bench/mixed_long.py). Only the public HTTP API: runs against
any server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, Protocol, overload

import orjson

from bench import servermetrics
from bench.common import Context, Figure, RunResult, check_pushed, log, now
from bench.e2e import prepare, until_ready
from bench.e2e_flow import Books, Producer, all_or_none, consumer, latency_stats, settle, stop
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.server import Target, attach_url

POLL_TIMEOUT_MS = 5000
GRACE_S = 5.0  # a message not received after consumers saw nothing for this long is lost
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


class Beside(Protocol):
    """Runs beside a window's production (the long run's memory samples)."""

    def start(self) -> object: ...

    async def stop(self) -> None: ...


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


async def load_window(
    ctx: Context, label: str, rate: float, seconds: float, memory: Beside | None = None
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
    carrying = books.pops - books.empty_pops
    stats |= {
        "msgs_per_pop": round(len(books.received) / books.pops, 2) if books.pops else None,
        "msgs_per_carrying_pop": round(len(books.received) / carrying, 2) if carrying else None,
        # each message's push, plus the pops and the acks (one per carrying pop) per message
        "requests_per_msg": (
            round(1 + (books.pops + carrying) / len(books.received), 2) if books.received else None
        ),
        "asked": rate,
        "seconds": seconds,
        "carried": carried_rate(books, start, seconds),
        "duplicated": books.duplicates,
        "pops": books.pops,
        "empty_pops": books.empty_pops,
        **{f"{name}_cpu_ms_per_msg": per_message_ms(cpu, name, received) for name in CPU_NAMES},
        "server_counts_per_msg": counts,
    }
    server_ms, requests = stats.get("server_cpu_ms_per_msg"), stats.get("requests_per_msg")
    stats["server_cpu_ms_per_request"] = (
        round(server_ms / requests, 4) if server_ms is not None and requests else None
    )
    return stats, cpu


OTHER = "other_"  # key prefix of the figures of --mixed-other-url (or --original)
BASELINE = "baseline_"  # key prefix of the figures of --baseline's server
WHO = {"": "", OTHER: "other server", BASELINE: "baseline"}


def step_keys(rate: float, prefix: str = "") -> list[tuple[str, str, str]]:
    at = f"{WHO[prefix] + ': ' if prefix else ''}asked {rate:,.0f} msg/s"
    k = f"{prefix}r{rate:g}"
    return [
        (f"{k}_carried", f"{at}: carried", "msg/s"),
        (f"{k}_p50", f"{at}: push 201 -> receipt p50", "ms"),
        (f"{k}_p99", f"{at}: push 201 -> receipt p99", "ms"),
        (f"{k}_server_cpu", f"{at}: server CPU per message", "ms"),
        (f"{k}_postgres_cpu", f"{at}: PostgreSQL CPU per message", "ms"),
        (f"{k}_loadgen_cpu", f"{at}: load generator CPU per message", "ms"),
        (f"{k}_per_pop", f"{at}: messages per pop", "msgs"),
        (f"{k}_per_carrying_pop", f"{at}: messages per pop that carried some", "msgs"),
        (f"{k}_requests", f"{at}: requests per message (push, pops, acks)", "req"),
        (f"{k}_server_per_request", f"{at}: server CPU per request", "ms"),
        (f"{k}_lost", f"{at}: lost", "msgs"),
        (f"{k}_duplicated", f"{at}: duplicated", "msgs"),
    ]


def prefixes(sizes: Sizes) -> list[str]:
    """The sides of every step: this checkout's server, --mixed-other-url's (or
    --original's), --baseline's."""
    out = [""]
    if sizes.mixed_other_url:
        out.append(OTHER)
    if sizes.mixed_baseline:
        out.append(BASELINE)
    return out


def mixed_figures(sizes: Sizes) -> list[Figure]:
    shape = (
        f"{sizes.mixed_producers} producers + {sizes.mixed_consumers} long-polling consumers"
        f" (batch {sizes.mixed_batch})"
    )
    out = []
    for prefix in prefixes(sizes):
        who = {"": "", OTHER: f"other server ({sizes.mixed_other_url}): ",
               BASELINE: "baseline: "}[prefix]  # fmt: skip
        limit = f"{sizes.mixed_p99_limit_ms:g} ms"
        out.append(
            Figure(f"{prefix}best_rate", f"{who}{shape}: highest rate carried at p99 <= {limit}",
                   "msg/s")
        )  # fmt: skip
        for rate in sizes.mixed_rates:
            out += [Figure(*k) for k in step_keys(rate, prefix)]
        out += [Figure(f"{prefix}lost", f"{who}lost, all steps", "msgs"),
                Figure(f"{prefix}duplicated", f"{who}duplicated, all steps", "msgs")]  # fmt: skip
    return out


def step_figures(rate: float, stats: dict[str, Any], prefix: str = "") -> dict[str, float]:
    values = (stats.get("carried"), stats.get("p50_ms"), stats.get("p99_ms"),
              stats.get("server_cpu_ms_per_msg"), stats.get("postgres_cpu_ms_per_msg"),
              stats.get("loadgen_cpu_ms_per_msg"), stats.get("msgs_per_pop"),
              stats.get("msgs_per_carrying_pop"), stats.get("requests_per_msg"),
              stats.get("server_cpu_ms_per_request"), stats.get("lost"),
              stats.get("duplicated"))  # fmt: skip
    keys = [key for key, _, _ in step_keys(rate, prefix)]
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


def other_target(ctx: Context) -> Target | None:
    """--mixed-other-url's server (its processes found by port when it runs here)."""
    s = ctx.sizes
    if not s.mixed_other_url:
        return None
    return attach_url(s.mixed_other_url.rstrip("/"), s.mixed_other_database_url)


async def idle_partitions(ctx: Context, label: str, count: int) -> None:
    """`count` partitions of another queue, one message each (pushed 1,000 per request):
    what a database of a real deployment holds beside the queue under load."""
    if count <= 0:
        return
    queue = ctx.queue("x", f"{label}-idle")
    (setup,) = await ctx.connect(1)
    try:
        for start in range(0, count, 1000):
            items = [it for i in range(start, min(count, start + 1000))
                     for it in ctx.items(queue, f"i{i}", 0, 1)]  # fmt: skip
            raw = setup.render("POST", "/api/v1/push", orjson.dumps({"items": items}))
            check_pushed(await setup.request_raw(raw, "POST"), len(items), "(x) idle partitions")
    finally:
        await setup.close()


def side_targets(ctx: Context) -> list[tuple[str, Target | None]]:
    """(prefix, server) of every side; None: the server under test."""
    targets: dict[str, Target | None] = {"": None, OTHER: other_target(ctx), BASELINE: ctx.baseline}
    return [(prefix, targets[prefix]) for prefix in prefixes(ctx.sizes)]


async def mixed_load(ctx: Context, run: int) -> RunResult:
    """Each asked rate on the server under test and on the others beside it (--baseline's,
    --mixed-other-url's or --original's), the side that goes first turning from step to
    step: they meet the same moment of a shared machine."""
    s = ctx.sizes
    all_sides = side_targets(ctx)
    if run == 0:
        for prefix, target in all_sides:
            with ctx.against(target) if target is not None else contextlib.nullcontext():
                await idle_partitions(ctx, f"{prefix}idle", s.mixed_idle_partitions)
    figures: dict[str, float] = {}
    cpu: dict[str, dict[str, float | None]] = {}
    steps: dict[str, list[dict[str, Any]]] = {prefix: [] for prefix, _ in all_sides}
    for step, rate in enumerate(s.mixed_rates):
        turn = (step + run) % len(all_sides)  # which side goes first turns
        for prefix, target in all_sides[turn:] + all_sides[:turn]:
            with ctx.against(target) if target is not None else contextlib.nullcontext():
                label = f"r{run}-{prefix}{rate:g}"
                stats, window = await load_window(ctx, label, rate, s.mixed_step_s)
            steps[prefix].append(stats)
            figures |= step_figures(rate, stats, prefix)
            for key, _, _ in step_keys(rate, prefix):
                cpu[key] = window
            who = f"{WHO[prefix]}, " if prefix else ""
            log(f"(x) run {run + 1}: {who}asked {rate:,.0f} msg/s: {stats}")
    for prefix, done in steps.items():
        figures[f"{prefix}best_rate"] = best_rate(done, s.mixed_p99_limit_ms)
        figures[f"{prefix}lost"] = float(sum(st["lost"] for st in done))
        figures[f"{prefix}duplicated"] = float(sum(st["duplicated"] for st in done))
        best = figures[f"{prefix}best_rate"]
        who = f"{WHO[prefix]}: " if prefix else ""
        log(f"(x) run {run + 1}: {who}highest rate carried at"
            f" p99 <= {s.mixed_p99_limit_ms:g} ms: {best:,.0f} msg/s")  # fmt: skip
    extra = {"steps": steps[""], "other_steps": steps.get(OTHER, []),
             "baseline_steps": steps.get(BASELINE, [])}  # fmt: skip
    return RunResult(figures, cpu, extra)
