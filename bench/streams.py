"""(k) stream window delivery latency and (l) idle stream polls (docs/streams.md).

(k): one queue receives a fixed rate (open loop: each producer connection sends a batch on
its own clock, late sends go at once and are counted), a 1 s tumbling stream over it with
grace 0 and long-polling consumers of one group ack each window as it comes. A window is
ready at end + grace once a message at/after that time is in (the producers push every
few ms, so "end + grace" is when it could first be ready): latency = window delivered
(response read) - (end + grace). Also shown: delivered - created_at of the first message
at/after the end (the push that made it ready; its commit is a little later). Every
window is checked against the database: it must hold every message with created_at in
[start, end). Windows only partly inside the production (the first and the last) are
left out.

(l): `stream_idle_polls` long stream polls on streams x groups with nothing ready (each
stream's queue holds one message whose 60 s window no later push completes), re-polled
as they are answered, for `stream_idle_s`: PostgreSQL's and the server's CPU.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import orjson
import psycopg2

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
from bench.httpclient import Connection, HttpError, close_all
from bench.options import Sizes
from bench.stats import percentile

WINDOW_MS = 1000
GRACE_MS = 0
POLL_TIMEOUT_MS = 5000
TARGET_P99_MS = 200
TARGET_PG_CPU = 5.0
IDLE_POLL_TIMEOUT_MS = 10_000
IDLE_WINDOW_MS = 60_000


async def define(conn: Connection, name: str, queues: list[str], **options: Any) -> None:
    body = {"name": name, "source_queue_names": queues, **options}
    expect(await conn.request("POST", "/api/v1/stream/define", body), (200, 201), "define")


# -- (k) -----------------------------------------------------------------------------------
def window_figures(sizes: Sizes) -> list[Figure]:
    at = f"{sizes.stream_rate:,.0f} msg/s, 1 s tumbling, grace 0"
    return [
        Figure("p50_ms", f"{at}: delivered - (end + grace), p50", "ms"),
        Figure("p99_ms", f"{at}: delivered - (end + grace), p99 (target <= 200)", "ms"),
        Figure("max_ms", f"{at}: delivered - (end + grace), max", "ms"),
        Figure("from_push_p99_ms", f"{at}: delivered - first created_at >= end, p99", "ms"),
        Figure("windows", f"{at}: complete windows measured", "windows"),
        Figure("incomplete", f"{at}: windows not matching the database (fails)", "windows"),
        Figure("achieved_rate", f"{at}: push rate achieved", "msg/s"),
        Figure("late_sends", f"{at}: batches sent > 50 ms after their slot", "batches"),
    ]


class Pushes:
    def __init__(self) -> None:
        self.sent = 0
        self.messages = 0
        self.late = 0
        self.first_at = 0.0
        self.last_at = 0.0


async def producer(
    ctx: Context, conn: Connection, queue: str, start: float, stop: float, period: float,
    offset: float, books: Pushes,
) -> None:  # fmt: skip
    """One batch every `period` s from `start + offset` until `stop` (wall clock)."""
    batch = ctx.sizes.stream_batch
    k = 0
    while True:
        slot = start + offset + k * period
        if slot >= stop:
            return
        ahead = slot - time.time()
        if ahead > 0:
            await asyncio.sleep(ahead)
        elif -ahead > 0.05:
            books.late += 1
        body = orjson.dumps({"items": ctx.items(queue, "Default", k * batch, batch)})
        sent = time.time()
        check_pushed(await conn.request_raw(conn.render("POST", "/api/v1/push", body), "POST"),
                     batch, "(k) push")  # fmt: skip
        books.first_at = books.first_at or sent
        books.last_at = sent
        books.sent += 1
        books.messages += batch
        k += 1


async def stream_consumer(
    conn: Connection, stream: str, until: float, got: list[dict[str, Any]]
) -> None:
    poll = conn.render("POST", "/api/v1/stream/poll", orjson.dumps(
        {"streamName": stream, "consumerGroup": "bench", "timeout": POLL_TIMEOUT_MS}))  # fmt: skip
    while time.time() < until:
        response = await conn.request_raw(poll, "POST")
        if response.status == 204:
            continue
        at = time.time()
        window = expect(response, 200, "(k) stream poll").json()["window"]
        ack = {"leaseId": window["leaseId"]}
        expect(await conn.request("POST", "/api/v1/stream/ack", ack), 200, "(k) stream ack")
        got.append({"at": at, "start": window["start"], "end": window["end"],
                    "ids": [int(m["id"]) for m in window["messages"]],
                    "deliveries": window["deliveryCount"]})  # fmt: skip


def epoch_s(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def database_counts(dsn: str, queue: str) -> tuple[dict[int, int], dict[int, float]]:
    """Messages of `queue` per 1 s window (by start, epoch ms) and, per window end, the
    created_at (epoch s) of the first message at/after it."""
    conn = psycopg2.connect(dsn, application_name="bench-streams-check")
    try:
        with conn.cursor() as cur:
            cur.execute(
                """SELECT (floor(extract(epoch FROM m.created_at) * 1000 / %(w)s) * %(w)s)::bigint,
                          count(*), min(extract(epoch FROM m.created_at))::float8
                     FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
                     JOIN queen.queues q ON q.id = p.queue_id
                    WHERE q.name = %(q)s GROUP BY 1 ORDER BY 1""",
                {"w": WINDOW_MS, "q": queue},
            )
            rows = cur.fetchall()
    finally:
        conn.close()
    counts = {int(start): int(n) for start, n, _ in rows}
    # the first created_at at/after window end E is the first of the window starting at E
    first_at = {int(start): float(first) for start, _, first in rows}
    return counts, first_at


async def window_latency(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    queue, stream = ctx.queue("k", f"r{run}"), ctx.queue("k", f"r{run}-stream")
    (setup,) = await ctx.connect(1)
    try:
        await configure(setup, queue)
        await define(setup, stream, [queue], window_type="tumbling",
                     window_duration_ms=WINDOW_MS, window_grace_period_ms=GRACE_MS)  # fmt: skip
    finally:
        await setup.close()
    per_second = s.stream_rate / s.stream_batch  # batches per second, all producers
    period = s.stream_producers / per_second
    producers = await ctx.connect(s.stream_producers)
    consumers = await ctx.connect(s.stream_consumers)
    start = time.time() + 0.5
    stop = start + s.stream_duration_s
    books = Pushes()
    got: list[dict[str, Any]] = []
    try:
        async with ctx.measure(f"k-r{run}") as cpu:
            tasks = [
                asyncio.create_task(producer(ctx, c, queue, start, stop, period,
                                             i * period / len(producers), books))
                for i, c in enumerate(producers)
            ]  # fmt: skip
            readers = [
                asyncio.create_task(stream_consumer(c, stream, stop + 1.5, got)) for c in consumers
            ]
            await asyncio.gather(*tasks)
            await asyncio.gather(*readers)
    finally:
        await close_all(producers + consumers)
    counts: dict[int, int] = {}
    first_at: dict[int, float] = {}
    if ctx.target.dsn:
        counts, first_at = await asyncio.to_thread(database_counts, ctx.target.dsn, queue)
    lat, from_push = [], []
    incomplete = 0
    seen: Counter[int] = Counter()
    for w in got:
        begin, end = round(epoch_s(w["start"]) * 1000), round(epoch_s(w["end"]) * 1000)
        seen[begin] += 1
        if begin < books.first_at * 1000 or end > books.last_at * 1000:
            continue  # partly outside the production: not a full window
        if ctx.target.dsn and counts.get(begin) != len(w["ids"]):
            incomplete += 1
            log(f"(k) window {w['start']}: {len(w['ids'])} messages, database {counts.get(begin)}")
        lat.append((w["at"] - (end + GRACE_MS) / 1000) * 1000)
        if end in first_at:
            from_push.append((w["at"] - first_at[end]) * 1000)
    if any(n > 1 for n in seen.values()):
        raise BenchError(f"(k) a window was delivered twice: {seen.most_common(1)}")
    if len(lat) < 3:
        raise BenchError(f"(k) only {len(lat)} full windows delivered")
    elapsed = max(1e-9, books.last_at - books.first_at)
    figures: dict[str, float] = {
        "p50_ms": round(percentile(lat, 50), 1),
        "p99_ms": round(percentile(lat, 99), 1),
        "max_ms": round(max(lat), 1),
        "windows": len(lat),
        "incomplete": incomplete,
        "achieved_rate": round((books.messages - s.stream_batch) / elapsed, 1),
        "late_sends": books.late,
    }
    if from_push:
        figures["from_push_p99_ms"] = round(percentile(from_push, 99), 1)
    extra = {"latencies_ms": [round(x, 1) for x in lat], "from_push_ms": [round(x, 1) for x in
             from_push], "batches": books.sent, "messages": books.messages,
             "checked_against_database": bool(ctx.target.dsn)}  # fmt: skip
    log(f"(k) run {run + 1}: {figures}")
    if incomplete:
        raise BenchError(f"(k) {incomplete} windows did not hold all their messages")
    return RunResult(figures, {k: cpu for k in figures}, extra)


# -- (l) -----------------------------------------------------------------------------------
def idle_figures(sizes: Sizes) -> list[Figure]:
    n = f"{sizes.stream_idle_polls:,} stream polls on {sizes.stream_idle_streams} streams x " \
        f"{sizes.stream_idle_groups} groups"  # fmt: skip
    return [
        Figure("postgres_cpu", f"{n}: PostgreSQL CPU (target <= 5)", "% of a core"),
        Figure("server_cpu", f"{n}: server CPU", "% of a core"),
        Figure("answered_204", f"{n}: answers 204 (each re-polled at once)", "polls"),
        Figure("other_answers", f"{n}: any other answer (fails)", "polls"),
    ]


async def idle_stream_polls(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    streams = [ctx.queue("l", f"r{run}-s{i}") for i in range(s.stream_idle_streams)]
    (setup,) = await ctx.connect(1)
    try:
        for name in streams:
            await configure(setup, name)  # each stream over its own queue of the same name
            await define(setup, name, [name], window_type="tumbling",
                         window_duration_ms=IDLE_WINDOW_MS, window_grace_period_ms=0)  # fmt: skip
            body = orjson.dumps({"items": ctx.items(name, "Default", 0, 1)})
            check_pushed(await setup.request_raw(setup.render("POST", "/api/v1/push", body),
                                                 "POST"), 1, "(l) push")  # fmt: skip
    finally:
        await setup.close()
    conns = await ctx.connect(s.stream_idle_polls)
    statuses: Counter[str] = Counter()
    until = 0.0

    async def hold(i: int, conn: Connection) -> None:
        name = streams[i % len(streams)]
        group = f"g{i // len(streams) % s.stream_idle_groups}"
        body = {"streamName": name, "consumerGroup": group, "timeout": IDLE_POLL_TIMEOUT_MS}
        poll = conn.render("POST", "/api/v1/stream/poll", orjson.dumps(body))
        await asyncio.sleep(i / 2000)  # a ramp of 2,000 polls a second
        while not until or now() < until:
            try:
                response = await conn.request_raw(poll, "POST")
            except HttpError as exc:
                statuses[f"closed: {exc}"] += 1
                return
            statuses[str(response.status)] += 1

    holders = [asyncio.create_task(hold(i, c)) for i, c in enumerate(conns)]
    try:
        await asyncio.sleep(s.stream_idle_polls / 2000 + 2.0)  # all waiting, first checks done
        async with ctx.measure(f"l-r{run}") as cpu:
            await asyncio.sleep(s.stream_idle_s)
        until = now()
        done, pending = await asyncio.wait(holders, timeout=IDLE_POLL_TIMEOUT_MS / 1000 + 10)
        for task in pending:
            statuses["no answer"] += 1
            task.cancel()
        for task in done:
            if task.exception() is not None:
                statuses[type(task.exception()).__name__] += 1
    finally:
        await close_all(conns)
    figures: dict[str, float] = {
        "answered_204": statuses["204"],
        "other_answers": sum(n for k, n in statuses.items() if k != "204"),
    }
    if cpu.get("postgres") is not None:
        figures["postgres_cpu"] = float(cpu["postgres"] or 0)
    if cpu.get("server") is not None:
        figures["server_cpu"] = float(cpu["server"] or 0)
    log(f"(l) run {run + 1}: {figures}, statuses {dict(statuses)}, cpu {cpu}")
    if figures["other_answers"]:
        raise BenchError(f"(l) answers other than 204: {dict(statuses)}")
    return RunResult(figures, {k: cpu for k in figures}, {"statuses": dict(statuses)})
