"""(p), trickle: a steady producer (single-message pushes spread over partitions, paced as
in (g)) and long-polling consumers, once per pop configuration.

After the window the consumers get up to `trickle_settle_s` to catch up. A configuration
still receiving then does not keep up with the rate: what it has not received counts as
`behind_at_cutoff`, and its latencies are those of the messages it received (the others
would wait longer). A message missing after GRACE_S without any arrival is lost and fails
the scenario."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.autopilot import Deliveries, PopConfig, consume, cpu_figures, latency_figures
from bench.autopilot_backlog import Measured, drop_queue
from bench.common import BenchError, Context, log, now
from bench.e2e import GRACE_S, prepare, render_pushes_to, until_ready
from bench.e2e_flow import Books, Producer, all_or_none, settle, stop
from bench.httpclient import close_all


def plan(ctx: Context, queue: str, partitions: list[str]) -> list[list[tuple[str, bytes]]]:
    """Each producer's pushes: message k of the window goes to partition k mod n."""
    s = ctx.sizes
    count = max(1, round(s.trickle_rate * s.trickle_duration_s))
    n = s.trickle_producers
    return [
        render_pushes_to(ctx, queue, [partitions[k % len(partitions)] for k in range(j, count, n)])
        for j in range(n)
    ]


async def trickle(ctx: Context, run: int, config: PopConfig) -> Measured:
    s = ctx.sizes
    queue = ctx.queue("p", f"r{run}-trickle-{config.name}")
    partitions = [f"p{i}" for i in range(s.trickle_partitions)]
    plans = plan(ctx, queue, partitions)
    await prepare(ctx, queue, partitions)
    books = Books()
    got = Deliveries(books=books)
    producers = [Producer(ctx.endpoint, p, s.trickle_rate / len(plans), books) for p in plans]
    conns = await ctx.connect(s.autopilot_consumers)
    pop = conns[0].render("GET", ctx.pop_path(queue, **config.params(wait=True)))
    consumers = [asyncio.create_task(consume(c, pop, True, got, lambda: False)) for c in conns]
    start = now()
    try:
        await until_ready(books, consumers, len(partitions))
        got.created_acked.clear()  # the warm-up messages
        async with ctx.measure(f"p-r{run}-trickle-{config.name}") as cpu:
            start = now() + 0.05
            await all_or_none([p.run(start) for p in producers])
        await settle(books, GRACE_S, s.trickle_settle_s)
    finally:
        await stop(consumers)
        await close_all(conns)
    await drop_queue(ctx, queue)
    arrivals = [at for txid, at in books.received.items() if txid in books.acked]
    seconds = max(s.trickle_duration_s, max(arrivals, default=start) - start)
    missing = books.missing()
    # still arriving at the cutoff: behind (a configuration that does not keep up), not lost
    quiet_s = now() - max(books.received.values(), default=start)
    lost = missing if quiet_s >= GRACE_S else 0
    figures = {"msg_per_s": round(len(arrivals) / seconds, 1),
               **latency_figures(got.latencies_ms())}  # fmt: skip
    figures |= cpu_figures(cpu, len(books.acked))
    extra: dict[str, Any] = {
        "pushed": len(books.acked),
        "push_rate": round(len(books.acked) / s.trickle_duration_s, 1),
        "received": len(arrivals),
        "lost": lost,
        "behind_at_cutoff": missing - lost,
        "duplicated": books.duplicates,
        "pops": got.tally.pops,
        "empty_pops": got.tally.empty_pops,
        "acks": got.tally.acks,
        "autopilot_choices": got.choice_dict(),
    }
    log(f"(p) trickle {config.name}: {figures} {extra}")
    if lost or books.duplicates:
        raise BenchError(
            f"(p) trickle {config.name}: {lost} message(s) lost, {books.duplicates} duplicated"
        )
    return figures, cpu, extra
