"""(c) pop + ack/batch with competing consumers, and (f) fan-out to consumer groups."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.common import (
    BenchError,
    Context,
    Figure,
    RunResult,
    expect,
    log,
    now,
    prefill,
)
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.stats import rate

EMPTY_POP_SLEEP_S = 0.005


@dataclass
class Tally:
    """What consumers received; a message seen twice is a duplicate delivery."""

    seen: set[tuple[str, str]] = field(default_factory=set)
    duplicates: int = 0
    pops: int = 0
    empty_pops: int = 0
    acks: int = 0

    def add(self, messages: list[dict[str, Any]]) -> None:
        for m in messages:
            key = (m["partitionId"], m["transactionId"])
            if key in self.seen:
                self.duplicates += 1
            else:
                self.seen.add(key)

    def as_dict(self) -> dict[str, int]:
        return {"delivered": len(self.seen), "duplicates": self.duplicates, "pops": self.pops,
                "empty_pops": self.empty_pops, "ack_requests": self.acks}  # fmt: skip


async def consume(
    conn: Connection,
    path: str,
    group: str | None,
    tally: Tally,
    done: Callable[[], bool],
) -> None:
    """Pop (wait=false) and ack each batch as completed until `done()`."""
    pop_raw = conn.render("GET", path)
    while not done():
        popped_at = now()
        response = await conn.request_raw(pop_raw)
        tally.pops += 1
        if response.status == 204:
            tally.empty_pops += 1
            await asyncio.sleep(EMPTY_POP_SLEEP_S)
            continue
        messages = expect(response, 200, "pop").json().get("messages") or []
        messages = [m for m in messages if m]
        if not messages:
            tally.empty_pops += 1
            continue
        await ack_messages(conn, messages, group, popped_at)
        tally.acks += 1
        tally.add(messages)


async def ack_messages(
    conn: Connection, messages: list[dict[str, Any]], group: str | None, popped_at: float
) -> None:
    """One `POST /api/v1/ack/batch` completing popped `messages` (with their lease ids)."""
    acks = [
        {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
         "leaseId": m.get("leaseId") or None, "status": "completed"}
        for m in messages
    ]  # fmt: skip
    body = orjson.dumps({"acknowledgments": acks, "consumerGroup": group})
    ack = expect(
        await conn.request_raw(conn.render("POST", "/api/v1/ack/batch", body), "POST"),
        200,
        "ack/batch",
    )
    results = ack.json()
    failed = [r for r in results if not r.get("success")] if isinstance(results, list) else []
    if failed or not isinstance(results, list):
        m = messages[0]
        raise BenchError(
            f"ack/batch: {len(failed)} of {len(acks)} failed "
            f"{(now() - popped_at) * 1000:.0f} ms after the pop of partition "
            f"{m.get('partition')!r} lease {m.get('leaseId')!r} group {group!r}: "
            f"{ack.body[:300]!r}"
        )


def stall_limit(messages: int) -> float:
    """Seconds after which a drain counts as stalled (a server bug, not a slow server)."""
    return max(60.0, messages / 200)


def consume_figures(sizes: Sizes) -> list[Figure]:
    return [
        Figure(
            "msg_per_s",
            f"{sizes.consumers} consumers, batch {sizes.pop_batch}, "
            f"{sizes.consume_partitions} partitions, {sizes.consume_messages:,} msgs",
            "msg/s",
        )
    ]


async def competing(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    queue = ctx.queue("c", f"r{run}")
    started = now()
    await prefill(ctx, queue, s.consume_messages, s.consume_partitions)
    prefill_s = now() - started
    tally = Tally()
    conns = await ctx.connect(s.consumers)
    path = ctx.pop_path(queue, batch=s.pop_batch)

    def done() -> bool:
        return len(tally.seen) >= s.consume_messages

    try:
        async with ctx.measure(f"c-r{run}") as cpu:
            started = now()
            await asyncio.wait_for(
                asyncio.gather(*(consume(c, path, None, tally, done) for c in conns)),
                stall_limit(s.consume_messages),
            )
            elapsed = now() - started
    except TimeoutError as exc:
        raise BenchError(
            f"consumers stalled: {len(tally.seen)} of {s.consume_messages} acked"
        ) from exc
    finally:
        await close_all(conns)
    value = rate(len(tally.seen), elapsed)
    extra = {"seconds": round(elapsed, 3), "prefill_s": round(prefill_s, 3), **tally.as_dict()}
    log(f"(c) run {run + 1}: {value:,.0f} msg/s {extra}, cpu {cpu}")
    if tally.duplicates:
        log(f"(c) WARNING: {tally.duplicates} messages delivered twice")
    return RunResult({"msg_per_s": value}, {"msg_per_s": cpu}, extra)


def fanout_figures(sizes: Sizes) -> list[Figure]:
    return [
        Figure(
            "deliveries_per_s",
            f"{sizes.fanout_groups} groups x {sizes.fanout_messages:,} msgs, batch "
            f"{sizes.pop_batch}",
            "deliveries/s",
        )
    ]


async def fanout(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    queue = ctx.queue("f", f"r{run}")
    started = now()
    await prefill(ctx, queue, s.fanout_messages, 1)
    prefill_s = now() - started
    groups = [f"g{i}" for i in range(s.fanout_groups)]
    tallies = {g: Tally() for g in groups}
    conns = await ctx.connect(len(groups))

    def runner(conn: Connection, group: str) -> Any:
        tally = tallies[group]
        path = ctx.pop_path(queue, batch=s.pop_batch, consumerGroup=group)
        return consume(conn, path, group, tally, lambda: len(tally.seen) >= s.fanout_messages)

    total = s.fanout_messages * len(groups)
    try:
        async with ctx.measure(f"f-r{run}") as cpu:
            started = now()
            await asyncio.wait_for(
                asyncio.gather(*(runner(c, g) for c, g in zip(conns, groups, strict=True))),
                stall_limit(total),
            )
            elapsed = now() - started
    except TimeoutError as exc:
        got = sum(len(t.seen) for t in tallies.values())
        raise BenchError(f"fan-out stalled: {got} of {total} deliveries") from exc
    finally:
        await close_all(conns)
    delivered = sum(len(t.seen) for t in tallies.values())
    value = rate(delivered, elapsed)
    extra: dict[str, Any] = {
        "seconds": round(elapsed, 3),
        "prefill_s": round(prefill_s, 3),
        "groups": {g: t.as_dict() for g, t in tallies.items()},
    }
    log(f"(f) run {run + 1}: {value:,.0f} deliveries/s in {elapsed:.1f}s, cpu {cpu}")
    dupes = sum(t.duplicates for t in tallies.values())
    if dupes:
        log(f"(f) WARNING: {dupes} messages delivered twice within a group")
    return RunResult({"deliveries_per_s": value}, {"deliveries_per_s": cpu}, extra)
