"""(o) Queen's SQL API (docs/sql.md): what a produce in the application's own transaction
costs PostgreSQL against the HTTP push's stored-function call, a 1,000-item produce against
the batched push's call (and against the whole HTTP request), and how soon a long poll
waiting on the server is answered after an SQL producer's commit.

PostgreSQL's CPU per call is the backend's own, read from /proc/<pid>/schedstat (ns) around
each call, the kinds of call in alternating blocks (a block's first calls left out: the
first of a block may plan again); medians and lower quartiles, the machine being shared.
A produce in a transaction is measured as the application makes it, an order row and the
produce in one transaction, less the same transaction without the produce."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import psycopg2
import psycopg2.extensions
import psycopg2.extras

from bench.common import BenchError, Context, Figure, RunResult, configure, expect, log, now
from bench.httpclient import close_all
from bench.options import Sizes
from bench.stats import percentile
from queen_threads.db import queries

WAIT_TIMEOUT_MS = 30_000
BLOCK = 20  # calls of one kind in a row
SKIPPED = 3  # of them left out


def sqlapi_figures(sizes: Sizes) -> list[Figure]:
    n = sizes.sqlapi_batch
    one = "produce_one in the caller's transaction: PG CPU"
    call = "HTTP single push's call (the named statement push_partition): PG CPU"
    wake = "SQL commit -> long poll answered"
    return [
        Figure("produce_one_us", f"{one}, median", "us"),
        Figure("produce_one_p25_us", f"{one}, p25", "us"),
        Figure("http_push1_us", f"{call}, median", "us"),
        Figure("http_push1_p25_us", f"{call}, p25", "us"),
        Figure("produce_batch_ms", f"produce of {n:,} items: PG CPU, median", "ms"),
        Figure("http_batch_ms", f"HTTP batched push's call, {n:,} items: PG CPU, median", "ms"),
        Figure("produce_batch_wall_ms", f"produce of {n:,} items: wall, median", "ms"),
        Figure("http_request_wall_ms", f"POST /api/v1/push of {n:,} items: wall, median", "ms"),
        Figure("wake_p50", f"{wake}, p50 ({sizes.latency_reps} reps)", "ms"),
        Figure("wake_p95", f"{wake}, p95", "ms"),
    ]


class Backend:
    """One application session and the CPU its PostgreSQL backend spends."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg2.connect(dsn, application_name="bench-sqlapi")
        self.conn.autocommit = True
        # answers stay text, as the HTTP requests' bodies do (the client's parse not timed)
        psycopg2.extras.register_default_jsonb(self.conn, loads=lambda text: text)
        self.cur = self.conn.cursor()
        self.cur.execute("SELECT pg_backend_pid()")
        row = self.cur.fetchone()
        assert row is not None
        self._stat = open(f"/proc/{row[0]}/schedstat")  # noqa: SIM115 (closed in close())

    def cpu_ns(self) -> int:
        self._stat.seek(0)
        return int(self._stat.read().split()[0])

    def run(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        self.cur.execute(sql, args)
        return self.cur.fetchone() if self.cur.description else None

    def blocks(self, calls: dict[str, Callable[[], Any]], count: int) -> dict[str, list[int]]:
        """Each kind's per-call CPU (ns), `count` calls of each, in alternating blocks."""
        samples: dict[str, list[int]] = {k: [] for k in calls}
        kinds = list(calls)
        for _ in range(max(1, count // BLOCK)):
            random.shuffle(kinds)
            for kind in kinds:
                for i in range(BLOCK + SKIPPED):
                    started = self.cpu_ns()
                    calls[kind]()
                    if i >= SKIPPED:
                        samples[kind].append(self.cpu_ns() - started)
        return samples

    def close(self) -> None:
        self._stat.close()
        self.conn.close()


def items(queue: str, count: int, pad: str) -> str:
    batch = [{"queue": queue, "partition": "P", "payload": {"seq": i, "pad": pad},
              "transactionId": str(uuid.uuid4())} for i in range(count)]  # fmt: skip
    return orjson.dumps(batch).decode()


def _costs(dsn: str, queue: str, s: Sizes, pad: str) -> dict[str, float]:
    db = Backend(dsn)
    try:
        db.run("CREATE TEMP TABLE bench_orders (id bigserial PRIMARY KEY, body jsonb)")
        (pid,) = db.run("SELECT queen.partition_id_v1(%s, 'P')", (queue,))
        payload = orjson.dumps({"seq": 0, "pad": pad}).decode()
        order = "BEGIN; INSERT INTO bench_orders (body) VALUES (%s::jsonb); "
        single = db.blocks({
            "order": lambda: db.run(order + "COMMIT", (payload,)),
            "order+produce": lambda: db.run(
                order + "SELECT queen.produce_one(%s, %s::jsonb, 'P', %s); COMMIT",
                (payload, queue, payload, str(uuid.uuid4()))),
            "http": lambda: db.run(queries.get("push_partition"), (pid, items(queue, 1, pad))),
        }, s.sqlapi_calls)  # fmt: skip
        batch_wall: list[float] = []

        def produce_batch() -> None:
            body = items(queue, s.sqlapi_batch, pad)
            started = time.perf_counter()
            db.run("SELECT queen.produce(%s::jsonb)", (body,))
            batch_wall.append(time.perf_counter() - started)

        batches = db.blocks({
            "produce": produce_batch,
            "http": lambda: db.run(
                queries.get("push_partition"), (pid, items(queue, s.sqlapi_batch, pad))
            ),
        }, s.sqlapi_batch_calls)  # fmt: skip
    finally:
        db.close()
    # a produce in the transaction: the transaction with it less the one without it
    extra = statistics.median(single["order+produce"]) - statistics.median(single["order"])
    extra_p25 = quartile(single["order+produce"]) - quartile(single["order"])
    return {
        "produce_one_us": round(extra / 1e3, 1),
        "produce_one_p25_us": round(extra_p25 / 1e3, 1),
        "http_push1_us": round(statistics.median(single["http"]) / 1e3, 1),
        "http_push1_p25_us": round(quartile(single["http"]) / 1e3, 1),
        "produce_batch_ms": round(statistics.median(batches["produce"]) / 1e6, 2),
        "http_batch_ms": round(statistics.median(batches["http"]) / 1e6, 2),
        "produce_batch_wall_ms": round(statistics.median(batch_wall) * 1000, 2),
    }


def quartile(values: list[int]) -> float:
    return sorted(values)[len(values) // 4]


async def _http_request_wall(ctx: Context, queue: str) -> float:
    (conn,) = await ctx.connect(1)
    walls: list[float] = []
    try:
        for _ in range(max(3, ctx.sizes.sqlapi_batch_calls // 4)):
            body = orjson.dumps({"items": ctx.items(queue, "P", 0, ctx.sizes.sqlapi_batch)})
            started = now()
            expect(await conn.request_raw(conn.render("POST", "/api/v1/push", body), "POST"),
                   201, "push")  # fmt: skip
            walls.append(now() - started)
    finally:
        await close_all([conn])
    return round(statistics.median(walls) * 1000, 2)


def _produce_and_commit(producer: psycopg2.extensions.connection, queue: str) -> float:
    """One message produced in a transaction of its own; when its commit returned."""
    with producer.cursor() as cur:
        cur.execute("SELECT queen.produce_one(%s, '1')", (queue,))
    producer.commit()
    return now()


async def _wakes(ctx: Context, queue: str) -> list[float]:
    """Long polls on the server, each answered by an SQL producer's commit: the time from
    the commit's return to the answer (negative: the answer came first)."""
    (consumer,) = await ctx.connect(1)
    await configure(consumer, queue)
    producer = psycopg2.connect(ctx.target.dsn or "", application_name="bench-sqlapi-wake")
    latencies: list[float] = []
    try:
        for rep in range(ctx.sizes.latency_reps + 1):
            poll = consumer.render("GET", ctx.pop_path(queue, batch=1, wait="true",
                                                       timeout=WAIT_TIMEOUT_MS))  # fmt: skip
            await consumer.send(poll)
            answer = asyncio.create_task(consumer.receive())
            await asyncio.sleep(ctx.rng.uniform(0.2, ctx.sizes.latency_max_prewait_s))
            committed_at = await asyncio.to_thread(_produce_and_commit, producer, queue)
            response = await asyncio.wait_for(answer, WAIT_TIMEOUT_MS / 1000 + 5)
            answered = now()
            body = expect(response, 200, "woken long poll").json()
            m = body["messages"][0]
            ack = {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                   "leaseId": m.get("leaseId"), "status": "completed"}  # fmt: skip
            expect(await consumer.request("POST", "/api/v1/ack", ack), 200, "ack")
            if rep:  # the first one warms up
                latencies.append((answered - committed_at) * 1000)
    finally:
        producer.close()
        await close_all([consumer])
    return latencies


async def sql_api(ctx: Context, run: int) -> RunResult:
    if not ctx.target.dsn:
        raise BenchError("(o) needs the server's database (the bench's own, or DATABASE_URL)")
    queue = ctx.queue("o", f"r{run}")
    figures = await asyncio.to_thread(_costs, ctx.target.dsn, queue, ctx.sizes, ctx.pad)
    figures["http_request_wall_ms"] = await _http_request_wall(ctx, queue)
    wakes = await _wakes(ctx, ctx.queue("o", f"r{run}-wake"))
    figures["wake_p50"] = round(percentile(wakes, 50), 2)
    figures["wake_p95"] = round(percentile(wakes, 95), 2)
    log(f"(o) run {run + 1}: produce_one {figures['produce_one_us']} us (p25 "
        f"{figures['produce_one_p25_us']}) vs push call {figures['http_push1_us']} us (p25 "
        f"{figures['http_push1_p25_us']}); produce {ctx.sizes.sqlapi_batch} "
        f"{figures['produce_batch_ms']} ms vs {figures['http_batch_ms']} ms (wall "
        f"{figures['produce_batch_wall_ms']} vs the HTTP request's "
        f"{figures['http_request_wall_ms']}); wake p50 {figures['wake_p50']} ms")  # fmt: skip
    return RunResult(figures, {}, {"wake_ms": [round(x, 3) for x in wakes]})
