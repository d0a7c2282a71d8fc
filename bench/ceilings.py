"""Measure the in-run ceilings once, before the scenarios (bench/ceiling_map.py says which).

HTTP: bench/bare_app.py on gunicorn with the server's configuration and worker count,
pushed to by the same client code as (a)/(b) (`push_throughput`), same warm-up and window.
Database: raw psycopg2 threads against the target's PostgreSQL (bench/ceiling_db.py), in
a scratch schema dropped afterwards, for the same window.
HTTP + database: the bare app again, now storing each request's items in that scratch
schema (BARE_DB_SCHEMA), pushed to as the HTTP ceilings are.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import orjson

from bench import ceiling_db, ceiling_map
from bench.ceiling_map import Ceiling, CeilingResult
from bench.common import Context, TxIds, log, now
from bench.push import push_throughput
from bench.server import BareServer

HTTP_KINDS = (ceiling_map.HTTP_SINGLE, ceiling_map.HTTP_BATCH)
COMBINED_KINDS = (ceiling_map.COMBINED_SINGLE, ceiling_map.COMBINED_BATCH)
SINGLE_KINDS = (ceiling_map.HTTP_SINGLE, ceiling_map.COMBINED_SINGLE)


async def measure_all(ctx: Context) -> dict[str, CeilingResult]:
    plan = ceiling_map.planned(ctx.options.scenarios, ctx.sizes, ctx.options.workers)
    results = {c.key: CeilingResult(c) for c in plan}
    http = [r for r in results.values() if r.ceiling.kind in HTTP_KINDS]
    combined = [r for r in results.values() if r.ceiling.kind in COMBINED_KINDS]
    db = [r for r in results.values() if r.ceiling.kind not in HTTP_KINDS + COMBINED_KINDS]
    if http:
        await _guard(http, _http(ctx, http))
    if db or combined:
        await _guard(db + combined, _database(ctx, db, combined))
    for r in results.values():
        value = "n/a" if r.value is None else f"{r.value:,.0f} {r.ceiling.unit}"
        log(f"ceiling {r.ceiling.key}: {value}{f' ({r.error})' if r.error else ''}")
    return results


async def _guard(results: list[CeilingResult], work: Any) -> None:
    """A ceiling that cannot be measured is reported as such; the scenarios still run."""
    try:
        await work
    except Exception as exc:
        for r in results:
            if r.value is None and r.error is None:
                r.error = f"{type(exc).__name__}: {exc}"[:300]


async def _http(ctx: Context, results: list[CeilingResult], schema: str | None = None) -> None:
    """Push to the bare app; with `schema`, the app stores the items there."""
    bare = BareServer(ctx.options, ctx.target.dsn, schema)
    log(f"ceilings: starting the bare HTTP app{' storing into ' + schema if schema else ''}")
    target = await asyncio.to_thread(bare.start)
    try:
        with ctx.against(target):
            for r in results:
                c = r.ceiling
                single = c.kind in SINGLE_KINDS
                batch = 1 if single else ctx.sizes.push_batch
                stats, r.cpu = await push_throughput(ctx, "ceiling", c.key, c.connections, batch)
                r.value = stats["req_per_s" if single else "msg_per_s"]
                r.extra = stats
    finally:
        await asyncio.to_thread(bare.stop)


async def _database(
    ctx: Context, results: list[CeilingResult], combined: list[CeilingResult]
) -> None:
    if not ctx.target.dsn:
        raise RuntimeError("no database URL (--database-url)")
    scratch = ceiling_db.Scratch(ctx.target.dsn, f"bench_ceiling_{ctx.tag}")
    await asyncio.to_thread(scratch.create)
    try:
        for r in results:
            await _one_database(ctx, scratch, r)
        if combined:
            await _http(ctx, combined, scratch.name)
    finally:
        await asyncio.to_thread(scratch.drop)


async def _one_database(ctx: Context, scratch: ceiling_db.Scratch, r: CeilingResult) -> None:
    c, s = r.ceiling, ctx.sizes
    warmup = s.warmup_s
    prefill_s = None
    if c.kind == ceiling_map.SKIP_LOCKED:
        started = now()
        await asyncio.to_thread(scratch.prefill_jobs, s.ceiling_queue_rows, 10, ctx.pad)
        prefill_s = round(now() - started, 3)
        step, warmup = scratch.lease_and_finish(s.pop_batch), 0.0  # a warm-up would drain rows
    else:
        step = _insert_step(ctx, scratch, c)
    if warmup:
        await asyncio.to_thread(ceiling_db.run_threads, scratch, step, c.connections, warmup)
    async with ctx.measure(f"ceiling-{c.key}") as cpu:
        stats = await asyncio.to_thread(
            ceiling_db.run_threads, scratch, step, c.connections, s.duration_s
        )
    r.value, r.cpu, r.extra = stats["per_s"], cpu, stats
    if prefill_s is not None:
        r.extra |= {"prefilled": s.ceiling_queue_rows, "prefill_s": prefill_s}


def _insert_step(ctx: Context, scratch: ceiling_db.Scratch, c: Ceiling) -> ceiling_db.Step:
    """The rows (a)/(b) push, one id source and sequence per thread."""
    partition = str(uuid.uuid4())  # one partition, as "Default" in (a)/(b)
    ids = [TxIds(random.Random(f"{ctx.tag}-{c.key}-{i}")) for i in range(c.connections)]
    seqs = [0] * c.connections
    queue = ctx.queue("ceiling", c.key)

    def items(thread: int, count: int) -> list[dict[str, Any]]:
        start, seqs[thread] = seqs[thread], seqs[thread] + count
        return ctx.items(queue, "Default", start, count, ids[thread])

    if c.kind == ceiling_map.INSERT_BATCH:
        return scratch.insert_batches(
            partition, lambda t: orjson.dumps(items(t, ctx.sizes.push_batch))
        )

    def row(thread: int) -> tuple[str, bytes]:
        (item,) = items(thread, 1)
        return item["transactionId"], orjson.dumps(item["payload"])

    return scratch.insert_rows(partition, row)
