"""(p) pop autopilot against fixed settings (issue 24): the pop configurations, the figures,
the consumer loop both phases share and the scenario's run.

Each run measures every configuration twice: draining a prefilled backlog with
non-waiting pops (bench/autopilot_backlog.py) and keeping up with a steady trickle with
long polls (bench/autopilot_trickle.py). The configurations are the server's autopilot
(`autopilot=true`, no `batch`/`partitions`), the 2.6.0 client's defaults with autopilot
off (batch 1, 1 partition) and the fixed settings of `Sizes.autopilot_fixed`. Their order
turns by one each run, so that none always goes first (or last) on a drifting machine.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.common import Figure, expect
from bench.consume import EMPTY_POP_SLEEP_S, Tally, ack_messages
from bench.e2e_flow import Books
from bench.httpclient import Connection
from bench.options import Sizes
from bench.stats import percentile

POLL_TIMEOUT_MS = 5000
PHASES = ("backlog", "trickle")
# figure key suffix -> (label, unit)
METRICS: dict[str, tuple[str, str]] = {
    "msg_per_s": ("delivered", "msg/s"),
    "p50_ms": ("createdAt to ack p50", "ms"),
    "p99_ms": ("createdAt to ack p99", "ms"),
    "pg_cpu": ("PostgreSQL CPU", "% of a core"),
    "pg_ms_per_1k": ("PostgreSQL CPU per 1,000 msgs", "ms"),
}


@dataclass(frozen=True)
class PopConfig:
    """How a consumer pops: the server's autopilot, or fixed batch and partitions."""

    name: str
    batch: int | None = None
    partitions: int | None = None
    autopilot: bool = False

    def params(self, wait: bool) -> dict[str, Any]:
        """The pop's query parameters (long polls wait POLL_TIMEOUT_MS)."""
        out: dict[str, Any] = {}
        if self.autopilot:
            out["autopilot"] = "true"
        if self.batch is not None:
            out["batch"] = self.batch
        if self.partitions is not None:
            out["partitions"] = self.partitions
        out["wait"] = "true" if wait else "false"
        if wait:
            out["timeout"] = POLL_TIMEOUT_MS
        return out

    def describe(self) -> str:
        if self.autopilot:
            return "autopilot"
        return f"batch {self.batch}, {self.partitions} partition{'s' * (self.partitions != 1)}"


AUTOPILOT = PopConfig("autopilot", autopilot=True)
DEFAULTS = PopConfig("defaults", batch=1, partitions=1)  # the 2.6.0 client, autopilot off


def configs(sizes: Sizes) -> list[PopConfig]:
    """The configurations measured (`--autopilot-only` may name some)."""
    fixed = [PopConfig(f"b{b}_p{p}", b, p) for b, p in sizes.autopilot_fixed]
    every = [AUTOPILOT, DEFAULTS, *fixed]
    named = [c for c in every if c.name in sizes.autopilot_only]
    return named or every


def phases(sizes: Sizes) -> list[str]:
    """The phases measured (`--autopilot-only` may name one)."""
    return [p for p in PHASES if p in sizes.autopilot_only] or list(PHASES)


def turned(items: list[PopConfig], run: int) -> list[PopConfig]:
    """The configurations in this run's order (turned by one per run)."""
    k = run % len(items) if items else 0
    return items[k:] + items[:k]


def figure_key(phase: str, config: str, metric: str) -> str:
    return f"{phase}_{config}_{metric}"


def autopilot_figures(sizes: Sizes) -> list[Figure]:
    where = {
        "backlog": f"backlog {sizes.autopilot_messages:,} msgs / "
        f"{sizes.autopilot_partitions} partitions, {sizes.autopilot_consumers} consumers",
        "trickle": f"trickle {sizes.trickle_rate:,.0f} msg/s for {sizes.trickle_duration_s:g} s, "
        f"{sizes.autopilot_consumers} long-polling consumers",
    }
    return [
        Figure(figure_key(phase, c.name, metric), f"{where[phase]}, {c.describe()}: {label}", unit)
        for phase in phases(sizes)
        for c in configs(sizes)
        for metric, (label, unit) in METRICS.items()
    ]


@dataclass
class Deliveries:
    """What the consumers of one configuration got: the tally, when each message was
    created and acked, and the autopilot's choices (partitions, batch) as the server echoed."""

    tally: Tally = field(default_factory=Tally)
    created_acked: list[tuple[str, float]] = field(default_factory=list)  # createdAt, wall s
    choices: Counter[tuple[int, int]] = field(default_factory=Counter)
    books: Books | None = None  # (trickle) arrivals against the producers' 201s

    def latencies_ms(self) -> list[float]:
        """createdAt (server, UTC) to the ack's answer (bench, wall clock: same machine)."""
        parsed: dict[str, float] = {}
        out = []
        for created, acked in self.created_acked:
            at = parsed.get(created)
            if at is None:
                at = parsed[created] = dt.datetime.fromisoformat(created).timestamp()
            out.append((acked - at) * 1000)
        return out

    def since_ms(self, start: float) -> list[float]:
        """From `start` (wall clock s) to each ack's answer."""
        return [(acked - start) * 1000 for _, acked in self.created_acked]

    def choice_dict(self) -> dict[str, int]:
        return {f"p{p}_b{b}": n for (p, b), n in self.choices.most_common()}


def latency_figures(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {}
    return {"p50_ms": round(percentile(latencies, 50), 2),
            "p99_ms": round(percentile(latencies, 99), 2)}  # fmt: skip


def cpu_figures(cpu: dict[str, float | None], messages: int) -> dict[str, float]:
    """PostgreSQL's % of a core, and its CPU ms per 1,000 messages over the window."""
    pct, seconds = cpu.get("postgres"), cpu.get("seconds")
    if pct is None:
        return {}
    out = {"pg_cpu": pct}
    if seconds and messages:
        out["pg_ms_per_1k"] = round(pct / 100 * seconds * 1000 / messages * 1000, 1)
    return out


async def consume(
    conn: Connection, pop_raw: bytes, wait: bool, got: Deliveries, done: Callable[[], bool]
) -> None:
    """Pop and ack until `done()`; an empty non-waiting pop rests EMPTY_POP_SLEEP_S."""
    tally = got.tally
    while not done():
        popped_at = time.perf_counter()
        response = await conn.request_raw(pop_raw)
        tally.pops += 1
        if response.status == 204:
            tally.empty_pops += 1
            if not wait:
                await asyncio.sleep(EMPTY_POP_SLEEP_S)
            continue
        answer = expect(response, 200, "(p) pop").json()
        messages = [m for m in answer.get("messages") or [] if m]
        pilot = answer.get("autopilot")
        if isinstance(pilot, dict):
            got.choices[(int(pilot.get("partitions") or 0), int(pilot.get("batch") or 0))] += 1
        if not messages:
            tally.empty_pops += 1
            continue
        if got.books is not None:
            got.books.arrive(messages, time.perf_counter())
        await ack_messages(conn, messages, None, popped_at)
        acked = time.time()
        tally.acks += 1
        tally.add(messages)
        got.created_acked.extend((m["createdAt"], acked) for m in messages)
