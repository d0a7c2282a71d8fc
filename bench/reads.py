"""(r) reads by offset: POST /api/v1/fetch of 1,000 partitions at once (docs/reads.md)."""

from __future__ import annotations

from typing import Any

import orjson

from bench.common import BenchError, Context, Figure, RunResult, check_pushed, expect, log, now
from bench.httpclient import close_all
from bench.options import Sizes
from bench.stats import percentile, rate


def fetch_body(queue: str, partitions: int) -> bytes:
    """One fetch of every partition p0..p{n-1} of `queue` from offset 0."""
    entries = [{"queue": queue, "partition": f"p{i}", "offset": 0} for i in range(partitions)]
    return orjson.dumps({"entries": entries})


def fill_body(ctx: Context, queue: str, first: int, count: int, records: int) -> bytes:
    """`records` items for each of partitions p{first}..p{first+count-1}, a partition's
    items together (so each partition's offsets come out dense)."""
    items: list[dict[str, Any]] = []
    for p in range(first, first + count):
        items += ctx.items(queue, f"p{p}", 0, records)
    return orjson.dumps({"items": items})


def check_fetched(body: dict[str, Any], partitions: int, records: int) -> int:
    entries = body.get("entries") or []
    got = sum(len(e.get("records") or []) for e in entries)
    if len(entries) != partitions or got != partitions * records:
        raise BenchError(f"fetch: {len(entries)} entries, {got} records "
                         f"(wanted {partitions}, {partitions * records})")  # fmt: skip
    return got


def fetch_figures(sizes: Sizes) -> list[Figure]:
    what = f"{sizes.reads_partitions:,} partitions x {sizes.reads_records} records"
    return [
        Figure("fetch_ms_p50", f"fetch of {what}, p50", "ms"),
        Figure("fetch_ms_p99", f"fetch of {what}, p99", "ms"),
        Figure("records_per_s", f"fetch of {what}, records read", "records/s"),
    ]


async def offset_fetch(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    queue = ctx.queue("r", f"r{run}")
    (conn,) = await ctx.connect(1)
    try:
        per_push = max(1, s.push_batch // s.reads_records)
        for first in range(0, s.reads_partitions, per_push):
            count = min(per_push, s.reads_partitions - first)
            raw = conn.render("POST", "/api/v1/push",
                              fill_body(ctx, queue, first, count, s.reads_records))  # fmt: skip
            check_pushed(await conn.request_raw(raw, "POST"), count * s.reads_records, "fill")
        raw = conn.render("POST", "/api/v1/fetch", fetch_body(queue, s.reads_partitions))
        latencies: list[float] = []
        read = 0
        async with ctx.measure(f"r-r{run}") as cpu:
            started = now()
            for _ in range(s.reads_reps):
                sent = now()
                response = expect(await conn.request_raw(raw, "POST"), 200, "fetch")
                latencies.append(now() - sent)
                read += check_fetched(response.json(), s.reads_partitions, s.reads_records)
            elapsed = now() - started
    finally:
        await close_all([conn])
    result = RunResult()
    result.figures = {
        "fetch_ms_p50": round(percentile(latencies, 50) * 1000, 2),
        "fetch_ms_p99": round(percentile(latencies, 99) * 1000, 2),
        "records_per_s": rate(read, elapsed),
    }
    result.cpu["fetch"] = cpu
    log(f"r: {s.reads_reps} fetches of {s.reads_partitions} partitions, "
        f"p50 {result.figures['fetch_ms_p50']} ms")  # fmt: skip
    return result
