"""(t) timer fire lateness (docs/timers.md).

`timer_count` timers (10,000) are scheduled through POST /api/v1/timers (`timer_batch`
per call, over `timer_schedulers` connections), each due at a random moment within
`timer_spread_s` (60 s) that starts `timer_lead_s` after the scheduling began, so that
every schedule has committed before the first is due. Long-polling consumers
(`timer_consumers`, autoAck) take the fired messages.

Figures: the fire's lateness as the server logs it (queen.timer_fires: fired_at -
deliverAt, read with --database-url or a started server), and the delivery's lateness as
a consumer sees it (its pop answered - the deliverAt the schedule answered; one host's
clock, so only meaningful when the load generator runs beside the server). Every timer
must arrive exactly once.
"""

from __future__ import annotations

import asyncio
import base64
import random
import time
from datetime import datetime
from typing import Any

import orjson
import psycopg2

from bench.common import BenchError, Context, Figure, RunResult, configure, expect, log
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.stats import percentile

POLL_TIMEOUT_MS = 5000
PAYLOAD = base64.b64encode(orjson.dumps({"timer": True})).decode()


def timer_figures(sizes: Sizes) -> list[Figure]:
    at = f"{sizes.timer_count:,} timers due within {sizes.timer_spread_s:g} s"
    return [
        Figure("fire_p50_ms", f"{at}: fired - deliverAt (server), p50", "ms"),
        Figure("fire_p99_ms", f"{at}: fired - deliverAt (server), p99 (target <= 50)", "ms"),
        Figure("fire_max_ms", f"{at}: fired - deliverAt (server), max", "ms"),
        Figure("late_50ms", f"{at}: fired more than 50 ms late", "timers"),
        Figure("delivered_p50_ms", f"{at}: pop answered - deliverAt (client), p50", "ms"),
        Figure("delivered_p99_ms", f"{at}: pop answered - deliverAt (client), p99", "ms"),
        Figure("schedule_rate", f"{at}: schedules per second (POST /timers)", "timers/s"),
        Figure("missing", f"{at}: timers never delivered (fails)", "timers"),
    ]


def epoch_s(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def plan(count: int, lead_s: float, spread_s: float, rng: random.Random) -> list[int]:
    """Each timer's delay from the start of scheduling, ms: within [lead, lead + spread)."""
    return sorted(round((lead_s + rng.random() * spread_s) * 1000) for _ in range(count))


async def scheduler(
    conn: Connection, queue: str, jobs: list[list[tuple[str, int]]], started: float,
    due: dict[str, float],
) -> None:  # fmt: skip
    """Schedule each batch of (key, delay from `started`) with the delay still left."""
    for batch in jobs:
        left = time.time() - started
        ops = [{"op": "schedule", "queue": queue, "timerKey": key, "payload": PAYLOAD,
                "delayMs": max(0, round(delay - left * 1000)), "txn": key}
               for key, delay in batch]  # fmt: skip
        results = expect(await conn.request("POST", "/api/v1/timers", {"operations": ops}),
                         200, "(t) schedule").json()["results"]  # fmt: skip
        for result in results:
            due[result["txn"]] = epoch_s(result["deliverAt"])


async def consumer(
    ctx: Context, conn: Connection, queue: str, until: float, got: dict[str, float],
    dupes: list[str], expected: int,
) -> None:  # fmt: skip
    path = ctx.pop_path(queue, batch=100, wait="true", timeout=POLL_TIMEOUT_MS, autoAck="true")
    while time.time() < until and len(got) < expected:
        response = await conn.request("GET", path)
        if response.status == 204:
            continue
        at = time.time()
        for message in expect(response, 200, "(t) pop").json()["messages"]:
            txn = message["transactionId"]
            if txn in got:
                dupes.append(txn)
            got.setdefault(txn, at)


def server_lateness(dsn: str, queue: str) -> list[float]:
    conn = psycopg2.connect(dsn, application_name="bench-timers-check")
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT extract(epoch FROM fired_at - greatest(deliver_at, scheduled_at))"
                " * 1000 FROM queen.timer_fires WHERE queue_name = %s",
                (queue,),
            )
            return [float(row[0]) for row in cur.fetchall()]
    finally:
        conn.close()


async def fire_lateness(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    queue = ctx.queue("t", f"r{run}")
    (setup,) = await ctx.connect(1)
    try:
        await configure(setup, queue)
    finally:
        await setup.close()
    delays = plan(s.timer_count, s.timer_lead_s, s.timer_spread_s, random.Random(run))
    keys = [f"{queue}-{i:06d}" for i in range(len(delays))]
    batches = [list(zip(keys[i:i + s.timer_batch], delays[i:i + s.timer_batch], strict=True))
               for i in range(0, len(keys), s.timer_batch)]  # fmt: skip
    schedulers = await ctx.connect(s.timer_schedulers)
    consumers = await ctx.connect(s.timer_consumers)
    due: dict[str, float] = {}
    got: dict[str, float] = {}
    dupes: list[str] = []
    until = time.time() + s.timer_lead_s + s.timer_spread_s + 30
    try:
        async with ctx.measure(f"t-r{run}") as cpu:
            readers = [asyncio.create_task(consumer(ctx, c, queue, until, got, dupes, len(keys)))
                       for c in consumers]  # fmt: skip
            started = time.time()
            await asyncio.gather(*(
                scheduler(c, queue, batches[i::len(schedulers)], started, due)
                for i, c in enumerate(schedulers)))  # fmt: skip
            scheduled_in = time.time() - started
            if scheduled_in > s.timer_lead_s:
                log(f"(t) scheduling took {scheduled_in:.1f} s, more than the lead time")
            await asyncio.gather(*readers)
    finally:
        await close_all(schedulers + consumers)
    delivered = [(got[k] - due[k]) * 1000 for k in got if k in due]
    fired = (
        await asyncio.to_thread(server_lateness, ctx.target.dsn, queue) if ctx.target.dsn else []
    )
    figures: dict[str, float] = {
        "schedule_rate": round(len(keys) / max(1e-9, scheduled_in), 1),
        "missing": len(keys) - len(got),
    }
    if delivered:
        figures["delivered_p50_ms"] = round(percentile(delivered, 50), 1)
        figures["delivered_p99_ms"] = round(percentile(delivered, 99), 1)
    if fired:
        figures.update(
            fire_p50_ms=round(percentile(fired, 50), 1),
            fire_p99_ms=round(percentile(fired, 99), 1),
            fire_max_ms=round(max(fired), 1),
            late_50ms=sum(1 for x in fired if x > 50),
        )
    log(f"(t) run {run + 1}: {figures}")
    if dupes:
        raise BenchError(f"(t) {len(dupes)} timers delivered twice, e.g. {dupes[0]}")
    if figures["missing"]:
        raise BenchError(f"(t) {figures['missing']} timers never delivered")
    extra: dict[str, Any] = {"scheduled_in_s": round(scheduled_in, 2), "fires_logged": len(fired)}
    return RunResult(figures, {k: cpu for k in figures}, extra)
