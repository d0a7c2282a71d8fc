"""(p), backlog: drain a prefilled backlog with competing consumers (non-waiting pops, one
ack/batch per pop, as (c)), once per pop configuration.

A configuration that has not drained the backlog after `autopilot_drain_limit_s` stops
there: its rate is what it acked in that time, its latencies those of the messages it
acked (the rest would wait longer), and its extra says `"drained": false`."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import quote

from bench.autopilot import Deliveries, PopConfig, consume, cpu_figures, latency_figures
from bench.common import BenchError, Context, expect, log, now, prefill
from bench.consume import stall_limit
from bench.httpclient import close_all
from bench.stats import rate

Measured = tuple[dict[str, float], dict[str, float | None], dict[str, Any]]


async def drop_queue(ctx: Context, queue: str) -> None:
    """Delete a measured queue (outside the window): the next configurations start from a
    database of the same size."""
    (conn,) = await ctx.connect(1)
    try:
        path = f"/api/v1/resources/queues/{quote(queue, safe='')}"
        expect(await conn.request("DELETE", path), (200, 204), "(p) delete queue")
    finally:
        await conn.close()


async def backlog(ctx: Context, run: int, config: PopConfig) -> Measured:
    s = ctx.sizes
    total = s.autopilot_messages
    queue = ctx.queue("p", f"r{run}-backlog-{config.name}")
    started = now()
    await prefill(ctx, queue, total, s.autopilot_partitions)
    prefill_s = now() - started
    got = Deliveries()
    conns = await ctx.connect(s.autopilot_consumers)
    pop = conns[0].render("GET", ctx.pop_path(queue, **config.params(wait=False)))

    deadline = now() + s.autopilot_drain_limit_s  # reset when the window starts

    def done() -> bool:
        return len(got.tally.seen) >= total or now() >= deadline

    try:
        async with ctx.measure(f"p-r{run}-backlog-{config.name}") as cpu:
            started, wall = now(), time.time()
            deadline = started + s.autopilot_drain_limit_s
            await asyncio.wait_for(
                asyncio.gather(*(consume(c, pop, False, got, done) for c in conns)),
                stall_limit(total),
            )
            elapsed = now() - started
    except TimeoutError as exc:
        raise BenchError(
            f"(p) {config.name}: consumers stalled, {len(got.tally.seen)} of {total} acked"
        ) from exc
    finally:
        await close_all(conns)
    await drop_queue(ctx, queue)
    delivered = len(got.tally.seen)
    latencies = got.latencies_ms()
    figures = {"msg_per_s": round(rate(delivered, elapsed), 1), **latency_figures(latencies)}
    figures |= cpu_figures(cpu, delivered)
    extra: dict[str, Any] = {
        "seconds": round(elapsed, 3),
        "prefill_s": round(prefill_s, 3),
        "drained": delivered >= total,
        **got.tally.as_dict(),
        "autopilot_choices": got.choice_dict(),
        # drain start to ack (createdAt's latency includes the prefill's time)
        **{f"drain_{k}": v for k, v in latency_figures(got.since_ms(wall)).items()},
    }
    log(f"(p) backlog {config.name}: {figures} {extra}")
    if got.tally.duplicates:
        log(f"(p) WARNING: {got.tally.duplicates} messages delivered twice")
    return figures, cpu, extra
