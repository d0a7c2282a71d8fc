"""(u) ephemeral (UNLOGGED) against durable queues: the same push and pop, one after the
other, in one run (docs/ephemeral.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import orjson

from bench.common import BenchError, Context, Figure, RunResult, check_pushed, expect, log, now
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.stats import rate

KINDS = ("ephemeral", "durable")


def push_request(ctx: Context, kind: str, queue: str, start: int, count: int) -> tuple[bytes, int]:
    """The push body of `kind` and the status its success answers."""
    if kind == "ephemeral":
        messages = [{"payload": {"seq": start + i, "pad": ctx.pad}} for i in range(count)]
        return orjson.dumps({"queue": queue, "messages": messages}), 201
    return ctx.push_body(queue, "Default", start, count), 201


def pop_path(kind: str, queue: str, batch: int) -> str:
    if kind == "ephemeral":
        return f"/api/v1/ephemeral/pop?queue={quote(queue, safe='')}&batch={batch}&autoAck=true"
    return f"/api/v1/pop/queue/{quote(queue, safe='')}?batch={batch}&wait=false&autoAck=true"


def popped(kind: str, status: int, body: Callable[[], Any]) -> int:
    if status == 204:
        return 0
    return len(body().get("messages") or [])


async def push_all(ctx: Context, conn: Connection, kind: str, queue: str) -> float:
    s = ctx.sizes
    started = now()
    for start in range(0, s.eph_messages, s.eph_batch):
        count = min(s.eph_batch, s.eph_messages - start)
        body, status = push_request(ctx, kind, queue, start, count)
        path = "/api/v1/ephemeral/push" if kind == "ephemeral" else "/api/v1/push"
        response = await conn.request_raw(conn.render("POST", path, body), "POST")
        if kind == "durable":
            check_pushed(response, count)
        else:
            expect(response, status, "ephemeral push")
    return now() - started


async def pop_all(ctx: Context, conn: Connection, kind: str, queue: str) -> float:
    s = ctx.sizes
    raw = conn.render("GET", pop_path(kind, queue, s.eph_batch))
    started, got = now(), 0
    while got < s.eph_messages:
        response = await conn.request_raw(raw)
        n = popped(kind, response.status, response.json)
        if n == 0:
            raise BenchError(f"{kind} pop: empty after {got} of {s.eph_messages}")
        got += n
    return now() - started


def ephemeral_figures(sizes: Sizes) -> list[Figure]:
    what = f"{sizes.eph_messages:,} msgs, {sizes.eph_batch}/request, 1 connection"
    return [
        Figure(f"{kind}_{op}", f"{kind} {op}, {what}", "msg/s")
        for kind in KINDS
        for op in ("push", "pop")
    ]


async def ephemeral_vs_durable(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    result = RunResult()
    (conn,) = await ctx.connect(1)
    try:
        for kind in KINDS:
            queue = ctx.queue("u", f"{kind}-r{run}")
            if kind == "ephemeral":  # room for the whole run
                body = {"queue": queue, "options": {"maxLength": s.eph_messages}}
                expect(await conn.request("POST", "/api/v1/ephemeral/configure", body), 200,
                       "ephemeral configure")  # fmt: skip
            async with ctx.measure(f"u-{kind}-push-r{run}") as cpu:
                seconds = await push_all(ctx, conn, kind, queue)
            result.figures[f"{kind}_push"] = rate(s.eph_messages, seconds)
            result.cpu[f"{kind}_push"] = cpu
            async with ctx.measure(f"u-{kind}-pop-r{run}") as cpu:
                seconds = await pop_all(ctx, conn, kind, queue)
            result.figures[f"{kind}_pop"] = rate(s.eph_messages, seconds)
            result.cpu[f"{kind}_pop"] = cpu
    finally:
        await close_all([conn])
    log("u: " + ", ".join(f"{k} {v:,.0f} msg/s" for k, v in result.figures.items()))
    return result
