"""What every scenario shares: the run context, measured windows, push bodies, prefill."""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from bench import procstat
from bench.ceiling_map import CeilingResult
from bench.httpclient import Connection, Endpoint, Response, close_all
from bench.options import Options, Sizes
from bench.pgwaits import WaitSampler
from bench.profile import Profiler
from bench.server import Target


class BenchError(Exception):
    """The server did something a scenario cannot accept (wrong status, lost message...)."""


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str


@dataclass
class RunResult:
    """One run of a scenario: its figures, the CPU of each measured window, anything else."""

    figures: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, dict[str, float | None]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    letter: str
    title: str
    figures: Callable[[Sizes], list[Figure]]
    run: Callable[[Context, int], Awaitable[RunResult]]


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


class TxIds:
    """Unique, time-ordered, UUID-shaped transaction ids (like the client's UUIDv7), cheap."""

    def __init__(self, rng: random.Random) -> None:
        self.node = rng.getrandbits(48)
        self.count = 0

    def next(self) -> str:
        self.count += 1
        n = self.count
        return (
            f"{n >> 28 & 0xFFFFFFFF:08x}-{n >> 12 & 0xFFFF:04x}-7{n & 0xFFF:03x}-"
            f"8{self.node >> 36:03x}-{self.node & 0xFFFFFFFFF:012x}"
        )


class Context:
    """Shared by all scenarios of one bench invocation."""

    def __init__(self, options: Options, target: Target) -> None:
        self.options = options
        self.sizes = options.sizes
        self.target = target
        self.endpoint = Endpoint.parse(target.url)
        self.rng = random.Random(options.seed)
        self.tag = f"{random.SystemRandom().getrandbits(24):06x}"
        self.txids = TxIds(self.rng)
        self.pad = "x" * max(0, options.sizes.payload_bytes - 24)
        self.profile_label: str | None = None
        self.profiles: dict[str, dict[str, Any]] = {}
        self.pg_waits: dict[str, dict[str, Any]] = {}
        self.rss_baseline_kb = 0  # server RSS before the first (e) run
        self.ceilings: dict[str, CeilingResult] = {}  # measured before the scenarios
        # what a scenario starts once and keeps for its next runs ((z): its databases), and
        # how to stop it at the end of the bench
        self.resources: dict[str, Any] = {}
        self.closers: list[Callable[[], None]] = []
        # --baseline: the other checkout's server, measured beside this one
        self.baseline: Target | None = None

    def close(self) -> None:
        """Stop what the scenarios started (the last started first)."""
        while self.closers:
            closer = self.closers.pop()
            try:
                closer()
            except Exception as exc:  # the others must still stop
                log(f"stopping a scenario's resources failed: {type(exc).__name__}: {exc}")

    @contextmanager
    def against(self, target: Target, headers: str = "") -> Iterator[None]:
        """Send to (and measure) another server for the block, with extra header lines."""
        saved = self.target, self.endpoint
        self.target = target
        self.endpoint = Endpoint.parse(target.url, headers)
        try:
            yield
        finally:
            self.target, self.endpoint = saved

    # names and bodies -------------------------------------------------------------------
    def queue(self, scenario: str, label: str) -> str:
        return f"bench-{self.tag}-{scenario}-{label}"

    def items(
        self, queue: str, partition: str, start: int, count: int, txids: TxIds | None = None
    ) -> list[dict[str, Any]]:
        """Push items; `txids`: another id source (one per thread: TxIds is not thread-safe)."""
        ids = txids or self.txids
        return [
            {"queue": queue, "partition": partition, "payload": {"seq": start + i, "pad": self.pad},
             "transactionId": ids.next()}
            for i in range(count)
        ]  # fmt: skip

    def push_body(self, queue: str, partition: str, start: int, count: int) -> bytes:
        return orjson.dumps({"items": self.items(queue, partition, start, count)})

    @staticmethod
    def pop_path(queue: str, **params: Any) -> str:
        query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items())
        return f"/api/v1/pop/queue/{quote(queue, safe='')}" + (f"?{query}" if query else "")

    async def connect(self, count: int = 1) -> list[Connection]:
        from bench.httpclient import open_connections

        return await open_connections(self.endpoint, count)

    # measured windows -------------------------------------------------------------------
    def worker_pids(self) -> list[int]:
        root = self.target.server_pid
        if root is None:
            return []
        table = procstat.process_table()
        return [p for p in procstat.tree(root, table) if p != root] or [root]

    @asynccontextmanager
    async def measure(self, label: str) -> AsyncIterator[dict[str, float | None]]:
        """CPU of server, PostgreSQL, load generator and machine during the block.

        Also samples PostgreSQL's wait events (kept in `pg_waits` under the label).
        """
        sampler = WaitSampler(self.target.dsn).start() if self.target.dsn else None
        apart = {}
        if sampler is not None and sampler.backend_pid is not None:
            apart["pg_sampler"] = ("postgres", sampler.backend_pid)
        window = procstat.CpuWindow(
            {"server": self.target.server_pid, "postgres": self.target.pg_pid}, apart
        ).start()
        profiler = None
        if self.profile_label is not None:
            out = Path(self.options.profile_dir)
            name = f"{self.profile_label}-{label}"
            profiler = Profiler(
                out, name, self.worker_pids(), native=self.options.profile_native
            ).start()
            await asyncio.sleep(0.3)  # let py-spy attach before the window's load
        result: dict[str, float | None] = {}
        try:
            yield result
        finally:
            result.update(window.stop())
            if sampler is not None:
                waits = await asyncio.to_thread(sampler.stop)
                self.pg_waits[label] = waits
                busiest = ", ".join(f"{w} {n}" for w, n in list(waits["by_wait"].items())[:4])
                extra = (
                    f", {waits['checkpoints']} checkpoint(s)" if waits.get("checkpoints") else ""
                )
                scans = waits.get("table_scans") or []
                if scans and scans[0]["seq_rows_read"] > 100_000:
                    top = scans[0]
                    extra += (
                        f"; {top['table']}: {top['seq_scans']} seq scans read "
                        f"{top['seq_rows_read']:,} rows"
                    )
                log(
                    f"{label}: postgres backends busy {waits['avg_active_backends']} "
                    f"({busiest}){extra}"
                )
            if profiler is not None:
                self.profiles[f"{self.profile_label}-{label}"] = await asyncio.to_thread(
                    profiler.stop
                )


async def worker_spread(conns: list[Connection]) -> list[int]:
    """How many of `conns` each server worker process serves (from /health's worker_id),
    largest first: gunicorn workers accept connections as they come, unevenly."""
    counts: dict[Any, int] = {}
    for conn in conns:
        response = await conn.request("GET", "/health")
        worker = response.json().get("worker_id") if response.status == 200 else None
        counts[worker] = counts.get(worker, 0) + 1
    return sorted(counts.values(), reverse=True)


def expect(response: Response, status: int | tuple[int, ...], what: str) -> Response:
    wanted = (status,) if isinstance(status, int) else status
    if response.status not in wanted:
        raise BenchError(
            f"{what}: HTTP {response.status} (wanted {'/'.join(map(str, wanted))}): "
            f"{response.body[:300]!r}"
        )
    return response


def check_pushed(response: Response, count: int, what: str = "push") -> None:
    expect(response, (201, 200), what)  # the original server answers a push 200
    queued = response.body.count(b'"status":"queued"')
    if queued != count:  # not orjson's compact form? count properly before complaining
        items = response.json()
        queued = sum(1 for i in items if isinstance(i, dict) and i.get("status") == "queued")
    if queued != count:
        raise BenchError(f"{what}: {queued} of {count} items queued: {response.body[:300]!r}")


async def configure(conn: Connection, queue: str, **options: Any) -> None:
    body = {"queue": queue, "options": options}
    expect(await conn.request("POST", "/api/v1/configure", body), (200, 201), "configure")


async def prefill(ctx: Context, queue: str, total: int, partitions: int, parallel: int = 2) -> None:
    """`total` messages spread evenly over partitions p0..p{n-1}, 1000 per request."""
    jobs: list[tuple[str, int, int]] = []
    per = total // partitions
    for p in range(partitions):
        count = per + (1 if p < total % partitions else 0)
        for start in range(0, count, ctx.sizes.push_batch):
            jobs.append((f"p{p}", start, min(ctx.sizes.push_batch, count - start)))
    conns = await ctx.connect(min(parallel, len(jobs)) or 1)

    async def worker(conn: Connection) -> None:
        while jobs:
            partition, start, count = jobs.pop()
            raw = conn.render("POST", "/api/v1/push", ctx.push_body(queue, partition, start, count))
            check_pushed(await conn.request_raw(raw, "POST"), count, "prefill push")

    try:
        await asyncio.gather(*(worker(c) for c in conns))
    finally:
        await close_all(conns)


def now() -> float:
    return time.perf_counter()
