"""(w) retry redelivery lateness (docs/architecture.md, "Due times").

`due_queues` queues (retryStrategy fixed, retryDelay `due_delay_ms`, no jitter), each with
one consumer connection that does `due_rounds` rounds: a long poll gets the message, the
consumer acks it `failed` (a retry is scheduled) and long-polls again at once. Its next
delivery is due at the ack answer's `nextAttemptAt`; the figure is how much later the
long poll's answer came (one host's clock: meaningful when the load generator runs beside
the server). The server's own backoff would come up to QUEUE_MAX_POLL_INTERVAL late.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime

from bench.common import BenchError, Context, Figure, RunResult, configure, expect, log
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.stats import percentile

POLL_TIMEOUT_MS = 10_000


def due_figures(sizes: Sizes) -> list[Figure]:
    at = (f"{sizes.due_queues} queues x {sizes.due_rounds} retries of "
          f"{sizes.due_delay_ms} ms")  # fmt: skip
    return [
        Figure("late_p50_ms", f"{at}: answered - nextAttemptAt, p50", "ms"),
        Figure("late_p99_ms", f"{at}: answered - nextAttemptAt, p99 (target <= 50)", "ms"),
        Figure("late_max_ms", f"{at}: answered - nextAttemptAt, max", "ms"),
        Figure("late_50ms", f"{at}: redeliveries more than 50 ms late", "retries"),
    ]


def epoch_s(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


async def rounds(ctx: Context, conn: Connection, queue: str, count: int, late: list[float]) -> None:
    txid = uuid.uuid4().hex
    item = {"queue": queue, "transactionId": txid, "payload": {"due": True}}
    expect(await conn.request("POST", "/api/v1/push", {"items": [item]}), 201, "(w) push")
    path = ctx.pop_path(queue, batch=1, wait="true", timeout=POLL_TIMEOUT_MS)
    due: float | None = None
    for n in range(count + 1):
        response = expect(await conn.request("GET", path), (200, 204), "(w) pop")
        at = time.time()
        if response.status == 204:
            raise BenchError(f"(w) {queue}: the retry never came within {POLL_TIMEOUT_MS} ms")
        [message] = response.json()["messages"]
        if due is not None:
            late.append((at - due) * 1000)
        if n == count:
            return
        ack = {"transactionId": message["transactionId"], "partitionId": message["partitionId"],
               "leaseId": message["leaseId"], "status": "failed", "error": str(n)}  # fmt: skip
        [result] = expect(await conn.request("POST", "/api/v1/ack", ack), 200, "(w) ack").json()
        if result.get("status") != "failed_retry":
            raise BenchError(f"(w) ack: {result}")
        due = epoch_s(result["nextAttemptAt"])


async def retry_lateness(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    queues = [ctx.queue("w", f"r{run}-q{i}") for i in range(s.due_queues)]
    conns = await ctx.connect(s.due_queues)
    late: list[float] = []
    try:
        for conn, queue in zip(conns, queues, strict=True):
            await configure(conn, queue, retryStrategy="fixed", retryDelay=s.due_delay_ms,
                            retryJitter=0, retryLimit=s.due_rounds + 10)  # fmt: skip
        async with ctx.measure(f"r-r{run}") as cpu:
            await asyncio.gather(*(rounds(ctx, c, q, s.due_rounds, late)
                                   for c, q in zip(conns, queues, strict=True)))  # fmt: skip
    finally:
        await close_all(conns)
    figures = {
        "late_p50_ms": round(percentile(late, 50), 1),
        "late_p99_ms": round(percentile(late, 99), 1),
        "late_max_ms": round(max(late), 1),
        "late_50ms": sum(1 for x in late if x > 50),
    }
    log(f"(w) run {run + 1}: {figures}")
    return RunResult(figures, {k: cpu for k in figures}, {"redeliveries": len(late)})
