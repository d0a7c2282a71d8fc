"""(g)'s moving parts: producers paced on a clock, long-polling consumers, and the books.

A producer owns a list of pre-rendered single-message pushes and a schedule (send k at
start + k / rate). Its connections take the next slot in turn: a connection that is free
waits for the slot's time, one that comes back late sends at once. When a send is more
than LAG_S behind its slot, the producer opens one more connection (up to
MAX_CONNECTIONS), so the rate holds as long as the server keeps up: the schedule never
waits for an answer beyond what the connections in flight allow (open loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.common import BenchError, check_pushed, expect, now
from bench.consume import ack_messages
from bench.httpclient import Connection, Endpoint, close_all
from bench.stats import percentile

LAG_S = 0.002
MAX_CONNECTIONS = 32  # per producer
START_CONNECTIONS = 2
OVERRUN_S = 1.0  # what is not sent this long after the window's last slot is not sent


@dataclass
class Books:
    """When each push was acknowledged and each message arrived (bench perf_counter)."""

    acked: dict[str, float] = field(default_factory=dict)  # transactionId -> 201 read
    received: dict[str, float] = field(default_factory=dict)  # transactionId -> 1st arrival
    duplicates: int = 0
    pops: int = 0
    empty_pops: int = 0
    lags: list[float] = field(default_factory=list)  # send time - slot time, s

    def arrive(self, messages: list[dict[str, Any]], at: float) -> None:
        for m in messages:
            txid = m["transactionId"]
            if txid in self.received:
                self.duplicates += 1
            else:
                self.received[txid] = at

    def missing(self) -> int:
        return sum(1 for txid in self.acked if txid not in self.received)


def latency_stats(acked: dict[str, float], received: dict[str, float]) -> dict[str, Any]:
    """Latency = arrival - push acknowledged, ms. A message can arrive before its push's
    201 is read: such raw values are negative, counted, and clamped to 0 in the percentiles."""
    raw = [(received[t] - at) * 1000 for t, at in acked.items() if t in received]
    clamped = [max(0.0, x) for x in raw]
    out: dict[str, Any] = {
        "pushed": len(acked),
        "received": len(raw),
        "lost": len(acked) - len(raw),
        "negative": sum(1 for x in raw if x < 0),
        "raw_min_ms": round(min(raw), 3) if raw else None,
    }
    if clamped:
        out |= {"p50_ms": round(percentile(clamped, 50), 3),
                "p99_ms": round(percentile(clamped, 99), 3),
                "max_ms": round(max(clamped), 3)}  # fmt: skip
    return out


class Producer:
    """Sends `requests` ((transactionId, raw request) pairs) at `rate` per second.

    `max_connections` 1 makes a closed-loop producer on one keep-alive connection: it sends
    on schedule while the server keeps up, back to back when it does not."""

    def __init__(
        self,
        endpoint: Endpoint,
        requests: Sequence[tuple[str, bytes]],
        rate: float,
        books: Books,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.endpoint = endpoint
        self.requests = requests
        self.max_connections = max_connections
        self.interval = 1.0 / rate
        self.books = books
        self.next = 0
        self.start = self.cutoff = 0.0
        self.conns: list[Connection] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def run(self, start: float) -> None:
        self.start = start
        self.cutoff = start + len(self.requests) * self.interval + OVERRUN_S
        for _ in range(min(START_CONNECTIONS, self.max_connections)):
            self._add()
        try:
            while self.tasks:  # a connection added while waiting joins the wait
                tasks = list(self.tasks)
                await all_or_none(tasks)
                self.tasks = [t for t in self.tasks if t not in tasks]
        finally:
            for t in self.tasks:  # a sender failed: stop the others (no-op when all ended)
                t.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            await close_all(self.conns)

    def _add(self) -> None:
        conn = Connection(self.endpoint)  # connects on its first send
        self.conns.append(conn)
        self.tasks.append(asyncio.create_task(self._sender(conn)))

    async def _sender(self, conn: Connection) -> None:
        books = self.books
        while self.next < len(self.requests):
            k = self.next
            self.next += 1
            slot = self.start + k * self.interval
            ahead = slot - now()
            if ahead > 0:
                await asyncio.sleep(ahead)
            elif now() > self.cutoff:
                return  # the server cannot keep up: the rest of the window is not sent
            elif -ahead > LAG_S and len(self.conns) < self.max_connections:
                self._add()
            txid, raw = self.requests[k]
            books.lags.append(max(0.0, now() - slot))
            response = await conn.request_raw(raw, "POST")
            books.acked[txid] = now()
            check_pushed(response, 1, "(g) push")


async def all_or_none(work: Sequence[Awaitable[None]]) -> None:
    """Run to the end, or, when one fails (or the caller is cancelled), cancel the rest."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def consumer(conn: Connection, pop_raw: bytes, books: Books) -> None:
    """Long-poll, note the arrivals, ack each batch; until cancelled."""
    while True:
        response = await conn.request_raw(pop_raw)
        at = now()
        books.pops += 1
        if response.status == 204:
            books.empty_pops += 1
            continue
        messages = [m for m in expect(response, 200, "(g) pop").json().get("messages") or [] if m]
        if not messages:
            books.empty_pops += 1
            continue
        books.arrive(messages, at)
        await ack_messages(conn, messages, None, at)


async def settle(books: Books, grace_s: float, limit_s: float = 120.0) -> None:
    """Wait until every acknowledged push has arrived, or nothing arrived for `grace_s`
    (consumers behind an overloaded server are still draining: not lost yet)."""
    deadline = now() + limit_s
    seen, quiet_since = len(books.received), now()
    while books.missing() and now() < deadline and now() - quiet_since < grace_s:
        await asyncio.sleep(0.02)
        if len(books.received) != seen:
            seen, quiet_since = len(books.received), now()


async def stop(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the consumers; one that failed (a rejected ack...) fails the window."""
    for t in tasks:
        t.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for r in results:
        if isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError):
            raise BenchError(f"(g) consumer failed: {type(r).__name__}: {r}") from r
