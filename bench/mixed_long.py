"""(y) the mixed load of (x) held at one rate for ten minutes (issue 31, part 4): the
server's memory (PSS summed over all its processes, shared pages counted once) sampled
every few seconds, its mean over the first and the last minute, and the latency, losses
and CPU per message of the whole window."""

from __future__ import annotations

import asyncio

from bench import procstat
from bench.common import Context, Figure, RunResult, log, now
from bench.mixed import load_window
from bench.options import Sizes

MEMORY_EVERY_S = 5.0


class MemoryTrack:
    """The server's PSS (all its processes) every few seconds, from a background task."""

    def __init__(self, root: int | None) -> None:
        self.root = root
        self.samples: list[tuple[float, int]] = []  # (bench time, kB)
        self.task: asyncio.Task[None] | None = None

    def start(self) -> MemoryTrack:
        if self.root is not None:
            self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        assert self.root is not None
        while True:
            kb = await asyncio.to_thread(procstat.tree_pss_kb, self.root)
            self.samples.append((now(), kb))
            await asyncio.sleep(MEMORY_EVERY_S)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    def mean_mb(self, since: float, until: float) -> float | None:
        values = [kb for at, kb in self.samples if since <= at <= until]
        return round(sum(values) / len(values) / 1024, 1) if values else None


def long_figures(sizes: Sizes) -> list[Figure]:
    at = f"{sizes.mixed_long_rate:,.0f} msg/s asked for {sizes.mixed_long_s:g} s"
    edge = f"{sizes.mixed_long_edge_s:g} s"
    return [
        Figure("carried", f"{at}: carried", "msg/s"),
        Figure("p50_ms", f"{at}: push 201 -> receipt p50", "ms"),
        Figure("p99_ms", f"{at}: push 201 -> receipt p99", "ms"),
        Figure("lost", f"{at}: lost", "msgs"),
        Figure("duplicated", f"{at}: duplicated", "msgs"),
        Figure("pss_first_mb", f"{at}: server PSS (all processes), first {edge}", "MB"),
        Figure("pss_last_mb", f"{at}: server PSS (all processes), last {edge}", "MB"),
        Figure("pss_growth_mb", f"{at}: server PSS, last - first", "MB"),
        Figure("server_cpu", f"{at}: server CPU per message", "ms"),
        Figure("postgres_cpu", f"{at}: PostgreSQL CPU per message", "ms"),
        Figure("loadgen_cpu", f"{at}: load generator CPU per message", "ms"),
    ]


async def mixed_long(ctx: Context, run: int) -> RunResult:
    s = ctx.sizes
    memory = MemoryTrack(ctx.target.server_pid)
    stats, window = await load_window(
        ctx, f"long-r{run}", s.mixed_long_rate, s.mixed_long_s, memory
    )
    figures: dict[str, float] = {}
    for key, name in (("carried", "carried"), ("p50_ms", "p50_ms"), ("p99_ms", "p99_ms"),
                      ("lost", "lost"), ("duplicated", "duplicated"),
                      ("server_cpu", "server_cpu_ms_per_msg"),
                      ("postgres_cpu", "postgres_cpu_ms_per_msg"),
                      ("loadgen_cpu", "loadgen_cpu_ms_per_msg")):  # fmt: skip
        if stats.get(name) is not None:
            figures[key] = float(stats[name])
    if memory.samples:
        first_at, last_at = memory.samples[0][0], memory.samples[-1][0]
        first = memory.mean_mb(first_at, first_at + s.mixed_long_edge_s)
        last = memory.mean_mb(last_at - s.mixed_long_edge_s, last_at)
        if first is not None and last is not None:
            figures |= {"pss_first_mb": first, "pss_last_mb": last,
                        "pss_growth_mb": round(last - first, 1)}  # fmt: skip
    stats["pss_mb"] = [
        (round(at - memory.samples[0][0], 1), round(kb / 1024, 1)) for at, kb in memory.samples
    ]
    log(f"(y) run {run + 1}: {figures}")
    return RunResult(figures, {k: window for k in figures}, stats)
