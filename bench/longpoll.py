"""(d) long-poll wake latency, (e) many idle long polls over many queues and (h) on one hot
queue: memory, CPU, answers on time."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from bench import procstat
from bench.common import (
    BenchError,
    Context,
    Figure,
    RunResult,
    check_pushed,
    configure,
    expect,
    log,
    now,
)
from bench.httpclient import Connection, HttpError, Response, close_all
from bench.options import Sizes
from bench.stats import percentile

WAIT_TIMEOUT_MS = 30_000
EARLY_MS = -100.0  # answered this long before the deadline counted from the send: early
LATE_MS = 1000.0  # and this long after it: late


async def timed_receive(conn: Connection) -> tuple[Response, float]:
    response = await conn.receive()
    return response, now()


def latency_figures(sizes: Sizes) -> list[Figure]:
    return [Figure(f"p{p}", f"wake latency p{p} ({sizes.latency_reps} reps)", "ms")
            for p in (50, 95, 99)]  # fmt: skip


async def _one_wake(ctx: Context, consumer: Connection, producer: Connection, queue: str) -> float:
    poll = consumer.render(
        "GET", ctx.pop_path(queue, batch=1, wait="true", timeout=WAIT_TIMEOUT_MS)
    )
    await consumer.send(poll)
    answer = asyncio.create_task(timed_receive(consumer))
    await asyncio.sleep(ctx.rng.uniform(0, ctx.sizes.latency_max_prewait_s))
    if answer.done():
        response, _ = answer.result()
        raise BenchError(f"long poll answered before any push: HTTP {response.status}")
    body = ctx.push_body(queue, "Default", 0, 1)
    push = await producer.request_raw(producer.render("POST", "/api/v1/push", body), "POST")
    pushed_at = now()
    check_pushed(push, 1, "wake push")
    response, popped_at = await asyncio.wait_for(answer, WAIT_TIMEOUT_MS / 1000 + 5)
    messages = expect(response, 200, "woken long poll").json().get("messages") or []
    if len(messages) != 1:
        raise BenchError(f"woken long poll carried {len(messages)} messages, wanted 1")
    m = messages[0]
    ack = {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
           "leaseId": m.get("leaseId") or None, "status": "completed"}  # fmt: skip
    expect(await producer.request("POST", "/api/v1/ack", ack), 200, "ack")
    return (popped_at - pushed_at) * 1000


async def wake_latency(ctx: Context, run: int) -> RunResult:
    queue = ctx.queue("d", f"r{run}")
    consumer, producer = await ctx.connect(2)
    latencies: list[float] = []
    try:
        await configure(producer, queue)
        await _one_wake(ctx, consumer, producer, queue)  # warm-up, not counted
        async with ctx.measure(f"d-r{run}") as cpu:
            for _ in range(ctx.sizes.latency_reps):
                latencies.append(await _one_wake(ctx, consumer, producer, queue))
    finally:
        await close_all([consumer, producer])
    figures = {f"p{p}": percentile(latencies, p) for p in (50, 95, 99)}
    extra = {
        "latencies_ms": [round(x, 3) for x in latencies],
        "max_ms": round(max(latencies), 3),
        "min_ms": round(min(latencies), 3),
    }
    log(
        f"(d) run {run + 1}: p50 {figures['p50']:.1f} ms, p95 {figures['p95']:.1f} ms, "
        f"p99 {figures['p99']:.1f} ms, max {extra['max_ms']:.1f} ms"
    )
    return RunResult(figures, {k: cpu for k in figures}, extra)


def idle_figures(sizes: Sizes, queues: int | None = None) -> list[Figure]:
    count = sizes.idle_queues if queues is None else queues
    n = f"{sizes.idle_polls:,} polls on {count:,} queue{'s' if count != 1 else ''}"
    return [
        Figure("rss_growth_mb", f"{n}: server RSS growth (peak - before the 1st run)", "MB"),
        Figure("server_cpu", f"{n}: server CPU while idle", "% of a core"),
        Figure("postgres_cpu", f"{n}: PostgreSQL CPU while idle", "% of a core"),
        Figure("on_time", f"{n}: answered 204 at the deadline (-0.1 s .. +1 s)", "polls"),
        Figure("early", f"{n}: answered before the deadline", "polls"),
        Figure("late_p99_ms", f"{n}: deadline answers' delay, p99", "ms"),
    ]


def hot_queue_figures(sizes: Sizes) -> list[Figure]:
    return idle_figures(sizes, 1)


async def hot_queue_polls(ctx: Context, run: int) -> RunResult:
    """(h) the common case: every idle long poll waits on one hot queue."""
    return await idle_polls(ctx, run, queue_count=1, letter="h")


async def idle_polls(
    ctx: Context, run: int, queue_count: int | None = None, letter: str = "e"
) -> RunResult:
    s = ctx.sizes
    server = ctx.target.server_pid
    count = s.idle_queues if queue_count is None else queue_count
    queues = [ctx.queue(letter, f"r{run}-q{i}") for i in range(count)]
    (setup,) = await ctx.connect(1)
    try:
        for q in queues:
            await configure(setup, q)
    finally:
        await setup.close()
    await asyncio.sleep(1.0)
    rss_before = procstat.tree_rss_kb(server) if server else 0
    # The allocator keeps what the first run took, so a later run's own "before" would hide
    # it: growth is measured from the RSS before the first (e) run of this invocation.
    baseline = ctx.rss_baseline_kb = ctx.rss_baseline_kb or rss_before
    conns = await ctx.connect(s.idle_polls)
    rss_connected = procstat.tree_rss_kb(server) if server else 0
    timeout_ms = int(s.idle_hold_s * 1000)
    sent_at: list[float] = []
    answers: list[asyncio.Task[tuple[Response, float]]] = []
    ramp_start = now()
    for i, conn in enumerate(conns):
        # a steady ramp, so that the deadline each poll gets on the server is close to the
        # one computed here from its send time (a burst would queue in the server first)
        ahead = ramp_start + i / s.idle_ramp_per_s - now()
        if ahead > 0:
            await asyncio.sleep(ahead)
        path = ctx.pop_path(queues[i % len(queues)], batch=1, wait="true", timeout=timeout_ms)
        await conn.send(conn.render("GET", path))
        sent_at.append(now())
        answers.append(asyncio.create_task(timed_receive(conn)))
    last_sent = sent_at[-1]
    window_end = sent_at[0] + s.idle_hold_s - 1.0
    await asyncio.sleep(max(0.0, min(2.0, (window_end - now()) / 4)))
    rss_peak = 0
    early = sum(1 for a in answers if a.done())
    async with ctx.measure(f"{letter}-r{run}") as cpu:
        while now() < window_end:
            rss_peak = max(rss_peak, procstat.tree_rss_kb(server) if server else 0)
            await asyncio.sleep(min(1.0, max(0.0, window_end - now())))
    rss_peak = max(rss_peak, procstat.tree_rss_kb(server) if server else 0)
    done, _ = await asyncio.wait(answers, timeout=s.idle_hold_s + 30)
    statuses: Counter[str] = Counter()
    lateness: list[float] = []
    on_time = 0
    for i, task in enumerate(answers):
        if task not in done:
            statuses["no answer"] += 1
            task.cancel()
            continue
        exc = task.exception()
        if exc is not None:
            statuses[type(exc).__name__ if not isinstance(exc, HttpError) else "closed"] += 1
            continue
        response, at = task.result()
        statuses[str(response.status)] += 1
        late = (at - sent_at[i] - s.idle_hold_s) * 1000
        lateness.append(late)
        on_time += response.status == 204 and EARLY_MS <= late <= LATE_MS
    await close_all(conns)
    rss_after = procstat.tree_rss_kb(server) if server else 0
    figures: dict[str, float] = {
        "rss_growth_mb": round((rss_peak - baseline) / 1024, 1),
        "on_time": on_time,
        "early": sum(1 for x in lateness if x < EARLY_MS),
    }
    not_early = [x for x in lateness if x >= EARLY_MS]
    if not_early:
        figures["late_p99_ms"] = round(percentile(not_early, 99), 1)
    if cpu.get("server") is not None:
        figures["server_cpu"] = float(cpu["server"] or 0)
    if cpu.get("postgres") is not None:
        figures["postgres_cpu"] = float(cpu["postgres"] or 0)
    extra: dict[str, Any] = {
        "polls": s.idle_polls,
        "queues": count,
        "timeout_ms": timeout_ms,
        "send_spread_s": round(last_sent - sent_at[0], 3),
        "answered_before_window": early,
        "statuses": dict(statuses),
        "late_ms_min": round(min(lateness), 1) if lateness else None,
        "late_ms_p50": round(percentile(lateness, 50), 1) if lateness else None,
        "late_ms_max": round(max(lateness), 1) if lateness else None,
        "early_ms_max": round(max((x for x in lateness if x < EARLY_MS), default=0.0), 1),
        "late_count": sum(1 for x in lateness if x > LATE_MS),
        "over_300ms": sum(1 for x in lateness if x > 300.0),
        "rss_kb": {
            "baseline": baseline,
            "before": rss_before,
            "connected": rss_connected,
            "peak": rss_peak,
            "after": rss_after,
        },
    }
    log(f"({letter}) run {run + 1}: {figures}, statuses {dict(statuses)}, cpu {cpu}")
    if on_time != s.idle_polls:
        log(
            f"({letter}) WARNING: only {on_time} of {s.idle_polls} polls answered 204 at their "
            f"deadline ({figures['early']} early)"
        )
    return RunResult(figures, {k: cpu for k in figures}, extra)
