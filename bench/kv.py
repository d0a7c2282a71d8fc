"""(m) key/value and locks (docs/kv.md): kv puts and gets per second through HTTP, one op
per request, against a raw psycopg2 upsert of the same rows (the database's ceiling for
this shape, measured in the scenario on a scratch table); the round trip of a lock
acquire followed by its release; and transactions of one pushed message, plain and
guarded by a held lock (the guard's cost)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson

from bench import ceiling_db
from bench.common import BenchError, Context, Figure, RunResult, expect, log, now
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.stats import percentile, rate

Body = Callable[[int, int], bytes]  # (connection index, request number) -> request body


def kv_figures(sizes: Sizes) -> list[Figure]:
    n = sizes.kv_connections
    return [
        Figure("put_per_s", f"kv put, 1 op/request, {n} connections", "req/s"),
        Figure("get_per_s", f"kv get, 1 op/request, {n} connections", "req/s"),
        Figure("upsert_ceiling_per_s", f"raw psycopg2 upsert, {n} connections", "rows/s"),
        Figure("put_of_ceiling", "kv put / raw upsert", "%"),
        Figure("lock_rtt_p50_ms", "lock acquire + release, p50", "ms"),
        Figure("lock_rtt_p99_ms", "lock acquire + release, p99", "ms"),
        Figure("tx_plain_per_s", f"transaction (1 push), {n} connections", "req/s"),
        Figure("tx_guarded_per_s", f"transaction (1 push + lock guard), {n} connections", "req/s"),
    ]


def put_body(ctx: Context, ns: str) -> Body:
    value = {"pad": ctx.pad}
    keys = ctx.sizes.kv_keys
    return lambda c, i: orjson.dumps({"operations": [
        {"op": "put", "ns": ns, "key": f"c{c}:{i % keys}", "value": value, "ttlSeconds": 600}
    ]})  # fmt: skip


def get_body(ctx: Context, ns: str) -> Body:
    keys = ctx.sizes.kv_keys
    return lambda c, i: orjson.dumps(
        {"operations": [{"op": "get", "ns": ns, "key": f"c{c}:{i % keys}"}]}
    )


def tx_body(ctx: Context, queue: str, guard: dict[str, Any] | None) -> Body:
    def body(c: int, i: int) -> bytes:
        doc: dict[str, Any] = {
            "operations": [{"type": "push", "items": ctx.items(queue, "Default", i, 1)}]
        }
        if guard is not None:
            doc["kv"] = [guard]
        return orjson.dumps(doc)

    return body


async def requests_for(
    conns: list[Connection], path: str, body: Body, seconds: float, check: Callable[[Any], bool]
) -> dict[str, Any]:
    """Every connection sends `body` requests back to back for `seconds`."""
    started = now()
    end = started + seconds

    async def worker(index: int, conn: Connection) -> tuple[int, float]:
        done, last = 0, started
        while now() < end:
            response = await conn.request_raw(conn.render("POST", path, body(index, done)), "POST")
            last = now()
            if not check(expect(response, 200, path).json()):
                raise BenchError(f"{path}: {response.body[:300]!r}")
            done += 1
        return done, last

    results = await asyncio.gather(*(worker(i, c) for i, c in enumerate(conns)))
    elapsed = max(last for _, last in results) - started
    count = sum(n for n, _ in results)
    return {"requests": count, "seconds": round(elapsed, 3), "per_s": rate(count, elapsed)}


async def window(
    ctx: Context, label: str, path: str, body: Body, check: Callable[[Any], bool]
) -> tuple[float, dict[str, float | None]]:
    conns = await ctx.connect(ctx.sizes.kv_connections)
    try:
        await requests_for(conns, path, body, ctx.sizes.warmup_s, check)
        async with ctx.measure(label) as cpu:
            stats = await requests_for(conns, path, body, ctx.sizes.duration_s, check)
    finally:
        await close_all(conns)
    return float(stats["per_s"]), cpu


def _acquire(name: str, owner: str, ttl: int) -> dict[str, Any]:
    return {"operations": [{"op": "acquire", "name": name, "ttlSeconds": ttl, "owner": owner}]}


def _applied(body: Any) -> bool:
    return bool(body["results"][0].get("applied"))


def _found(body: Any) -> bool:
    return bool(body["results"][0].get("found"))


def _committed(body: Any) -> bool:
    return body.get("success") is True


async def lock_round_trips(ctx: Context, name: str) -> list[float]:
    """Acquire then release, one after another on one connection: seconds each."""
    [conn] = await ctx.connect(1)
    times: list[float] = []
    try:
        for _ in range(ctx.sizes.lock_reps):
            sent = now()
            got = await conn.request("POST", "/api/v1/locks", _acquire(name, ctx.tag, 30))
            [grant] = expect(got, 200, "acquire").json()["results"]
            if not grant.get("acquired"):
                raise BenchError(f"acquire refused: {grant}")
            release = {"operations": [{"op": "release", "name": name, "token": grant["token"]}]}
            done = await conn.request("POST", "/api/v1/locks", release)
            if not expect(done, 200, "release").json()["results"][0].get("released"):
                raise BenchError("release refused")
            times.append(now() - sent)
    finally:
        await close_all([conn])
    return times


async def held_guard(ctx: Context, name: str) -> dict[str, Any]:
    """The guard of a lock taken for the rest of the run."""
    [conn] = await ctx.connect(1)
    try:
        got = await conn.request("POST", "/api/v1/locks", _acquire(name, ctx.tag, 600))
        return dict(expect(got, 200, "acquire").json()["results"][0]["guard"])
    finally:
        await close_all([conn])


async def prefill(ctx: Context, ns: str) -> None:
    """Every key the get window reads, written in batches of 256 puts."""
    keys = [f"c{c}:{i}" for c in range(ctx.sizes.kv_connections) for i in range(ctx.sizes.kv_keys)]
    value = {"pad": ctx.pad}
    [conn] = await ctx.connect(1)
    try:
        for at in range(0, len(keys), 256):
            ops = [{"op": "put", "ns": ns, "key": k, "value": value, "ttlSeconds": 600}
                   for k in keys[at : at + 256]]  # fmt: skip
            expect(await conn.request("POST", "/api/v1/kv", {"operations": ops}), 200, "prefill")
    finally:
        await close_all([conn])


async def upsert_ceiling(ctx: Context) -> float | None:
    """Raw psycopg2 upserts of the same rows, one per commit (None without a DSN)."""
    if not ctx.target.dsn:
        return None
    scratch = ceiling_db.Scratch(ctx.target.dsn, f"bench_kv_{ctx.tag}")
    await asyncio.to_thread(scratch.create)
    try:
        step = scratch.upsert_keys(ctx.sizes.kv_keys, orjson.dumps({"pad": ctx.pad}))
        n, s = ctx.sizes.kv_connections, ctx.sizes
        await asyncio.to_thread(ceiling_db.run_threads, scratch, step, n, s.warmup_s)
        async with ctx.measure("m-upsert-ceiling"):
            stats = await asyncio.to_thread(ceiling_db.run_threads, scratch, step, n, s.duration_s)
    finally:
        await asyncio.to_thread(scratch.drop)
    return float(stats["per_s"])


async def key_value(ctx: Context, run: int) -> RunResult:
    result = RunResult()
    f = result.figures
    ns = f"bench-{ctx.tag}-r{run}"
    queue = ctx.queue("m", f"tx-r{run}")
    await prefill(ctx, ns)
    windows: list[tuple[str, str, Body, Callable[[Any], bool]]] = [
        ("put_per_s", "/api/v1/kv", put_body(ctx, ns), _applied),
        ("get_per_s", "/api/v1/kv", get_body(ctx, ns), _found),
        ("tx_plain_per_s", "/api/v1/transaction", tx_body(ctx, queue, None), _committed),
    ]
    for key, path, body, check in windows:
        f[key], result.cpu[key] = await window(ctx, f"m-{key}", path, body, check)
    guarded = tx_body(ctx, queue, await held_guard(ctx, f"{ns}-guard"))
    key = "tx_guarded_per_s"
    f[key], result.cpu[key] = await window(
        ctx, f"m-{key}", "/api/v1/transaction", guarded, _committed
    )
    ceiling = await upsert_ceiling(ctx)
    if ceiling:
        f["upsert_ceiling_per_s"] = ceiling
        f["put_of_ceiling"] = round(100 * f["put_per_s"] / ceiling, 1)
    times = await lock_round_trips(ctx, f"{ns}-rtt")
    f["lock_rtt_p50_ms"] = round(percentile(times, 50) * 1000, 2)
    f["lock_rtt_p99_ms"] = round(percentile(times, 99) * 1000, 2)
    log(f"(m) run {run + 1}: " + ", ".join(f"{k} {v:,.1f}" for k, v in f.items()))
    return result
