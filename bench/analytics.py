"""(j) the dashboard's chart queries over a full analytics history: 7 days of minutes for
100 queues (about 1M rows, docs/api-admin.md "Analytics"), written into the bench's own
database with generate_series (bench/sql/analytics_fill.sql), then each chart asked
through the real HTTP route, back to back; p50/p99 per chart against the 100 ms target.

The fill writes synthetic rows into the server's database, so (j) runs only against a
server the bench started itself (not with --url).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from urllib.parse import urlencode

import psycopg2

from bench.common import BenchError, Context, Figure, RunResult, expect, log, now
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.stats import percentile

TARGET_MS = 100.0
FILL_SQL = Path(__file__).with_name("sql") / "analytics_fill.sql"
QUEUES_PER_NAMESPACE = 10
DAY = dt.timedelta(days=1)
# (key, label, route, parameters besides from/to, range): {queue} and {namespace} are the
# first synthetic queue and namespace.
CHARTS: tuple[tuple[str, str, str, dict[str, str], dt.timedelta], ...] = (
    ("all_1h", "all queues, 1 h", "/status/analytics", {}, dt.timedelta(hours=1)),
    ("all_1d", "all queues, 1 day", "/status/analytics", {}, DAY),
    ("all_7d", "all queues, 7 days", "/status/analytics", {}, 7 * DAY),
    ("queue_1h", "one queue, 1 h", "/status/analytics", {"queue": "{queue}"},
     dt.timedelta(hours=1)),
    ("queue_1d", "one queue, 1 day", "/status/analytics", {"queue": "{queue}"}, DAY),
    ("queue_7d", "one queue, 7 days", "/status/analytics", {"queue": "{queue}"}, 7 * DAY),
    ("lag_7d", "queue-lag, every queue's latest, 7 days", "/analytics/queue-lag", {}, 7 * DAY),
    ("system_7d", "system-metrics, 7 days", "/analytics/system-metrics", {}, 7 * DAY),
    ("ns_1d", "one namespace (10 queues), 1 day", "/status/analytics",
     {"namespace": "{namespace}"}, DAY),
)  # fmt: skip


def analytics_figures(sizes: Sizes) -> list[Figure]:
    return [
        Figure(f"{key}_{p}", f"{label}, {p}", "ms")
        for key, label, *_ in CHARTS
        for p in ("p50", "p99")
    ]


def _fill(dsn: str, prefix: str, minutes: int) -> float:
    """Write the history (seconds taken); VACUUM ANALYZE so plans see the real sizes."""
    started = now()
    conn = psycopg2.connect(dsn, application_name="bench-analytics-fill")
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(FILL_SQL.read_text(), {"prefix": prefix, "minutes": minutes})
            for table in ("metrics_queue_minutes", "metrics_minutes", "metrics_process_minutes"):
                cur.execute(f"VACUUM ANALYZE queen.{table}")
            cur.execute("SELECT count(*) FROM queen.metrics_queue_minutes")
            (rows,) = cur.fetchone() or (0,)
    finally:
        conn.close()
    log(f"(j) {rows:,} queue-minute rows in the table after the fill")
    return now() - started


async def _prepare(ctx: Context, conn: Connection, prefix: str) -> float:
    s = ctx.sizes
    for i in range(s.analytics_queues):
        namespace = f"{prefix}ns{i // QUEUES_PER_NAMESPACE}"
        body = {"queue": f"{prefix}q{i:03d}", "namespace": namespace, "options": {}}
        expect(await conn.request("POST", "/api/v1/configure", body), (200, 201), "configure")
    if not ctx.target.dsn:
        raise BenchError("(j) needs the server's database")
    return await asyncio.to_thread(_fill, ctx.target.dsn, prefix, s.analytics_days * 1440)


async def _timed(conn: Connection, path: str, reps: int) -> list[float]:
    raw = conn.render("GET", path)
    expect(await conn.request_raw(raw), 200, path)  # warm-up: plans, caches
    latencies = []
    for _ in range(reps):
        sent = now()
        response = await conn.request_raw(raw)
        latencies.append((now() - sent) * 1000)
        expect(response, 200, path)
    return latencies


def _path(route: str, params: dict[str, str], span: dt.timedelta, names: dict[str, str]) -> str:
    to = dt.datetime.now(dt.UTC)
    query = {k: v.format(**names) for k, v in params.items()}
    query |= {"from": (to - span).isoformat(), "to": to.isoformat()}
    return f"/api/v1{route}?{urlencode(query)}"


async def chart_queries(ctx: Context, run: int) -> RunResult:
    if not ctx.target.started_here:
        raise BenchError("(j) writes a synthetic history into the database: run it with --start")
    prefix = ctx.queue("j", "")
    names = {"queue": f"{prefix}q000", "namespace": f"{prefix}ns0"}
    conn = (await ctx.connect(1))[0]
    result = RunResult()
    try:
        if run == 0:
            result.extra["fill_s"] = round(await _prepare(ctx, conn, prefix), 1)
        span_days, reps = ctx.sizes.analytics_days, ctx.sizes.analytics_reps
        async with ctx.measure(f"j-r{run}") as cpu:
            for key, label, route, params, span in CHARTS:
                path = _path(route, params, min(span, span_days * DAY), names)
                latencies = await _timed(conn, path, reps)
                p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
                result.figures[f"{key}_p50"], result.figures[f"{key}_p99"] = p50, p99
                verdict = "ok" if p99 < TARGET_MS else f"OVER the {TARGET_MS:.0f} ms target"
                log(f"(j) {label}: p50 {p50:.1f} ms, p99 {p99:.1f} ms ({verdict})")
        result.cpu = {f.key: cpu for f in analytics_figures(ctx.sizes)}
        result.extra |= {
            "target_ms": TARGET_MS,
            "queues": ctx.sizes.analytics_queues,
            "days": span_days,
            "over_target": [
                k for k, v in result.figures.items() if k.endswith("p99") and v >= TARGET_MS
            ],
        }
    finally:
        await close_all([conn])
    return result
