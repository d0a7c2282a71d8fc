"""Run the selected scenarios (repeated), summarise each figure, keep every raw number."""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

from bench import procstat
from bench.ceiling_map import ceiling_key, combined_key, percent_of
from bench.ceilings import measure_all
from bench.common import Context, RunResult, log, now
from bench.report import CpuRow, Row
from bench.scenarios import SCENARIOS
from bench.server import Target
from bench.stats import Summary, median

PAUSE_BETWEEN_RUNS_S = 1.0


@dataclass
class ScenarioOutcome:
    letter: str
    title: str
    runs: list[RunResult] = field(default_factory=list)
    error: str | None = None
    profile_error: str | None = None
    side: str = ""  # "baseline": the --baseline checkout's server

    @property
    def key(self) -> str:
        return f"{self.letter}@{self.side}" if self.side else self.letter

    @property
    def label(self) -> str:
        return f"({self.letter}) {self.title}" + (f" [{self.side}]" if self.side else "")

    def as_dict(self, ctx: Context) -> dict[str, Any]:
        figures = SCENARIOS[self.letter].figures(ctx.sizes)
        return {
            "title": self.title,
            "error": self.error,
            "profile_error": self.profile_error,
            "figures": {
                f.key: {
                    "label": f.label,
                    "unit": f.unit,
                    **(summary.as_dict() if (summary := self.summary(f.key)) else {}),
                    **self.ceiling_dict(ctx, f.key, summary),
                }
                for f in figures
            },
            "runs": [asdict(r) for r in self.runs],
        }

    def ceiling(self, ctx: Context, key: str) -> tuple[str | None, float | None]:
        """The figure's ceiling (key, measured value), if it has one."""
        name = ceiling_key(self.letter, key)
        result = ctx.ceilings.get(name) if name else None
        return name, result.value if result else None

    def combined(self, ctx: Context, key: str) -> tuple[str | None, float | None]:
        """The figure's combined (HTTP + database) ceiling (key, measured value), if any."""
        name = combined_key(self.letter, key)
        result = ctx.ceilings.get(name) if name else None
        return name, result.value if result else None

    def ceiling_dict(self, ctx: Context, key: str, summary: Summary | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for prefix, (name, value) in (("ceiling", self.ceiling(ctx, key)),
                                      ("combined", self.combined(ctx, key))):  # fmt: skip
            if name is None:
                continue
            pct = percent_of(summary.median, value) if summary else None
            out |= {prefix: name, f"{prefix}_value": value,
                    f"pct_of_{prefix}": None if pct is None else round(pct, 1)}  # fmt: skip
        return out

    def summary(self, key: str) -> Summary | None:
        values = [r.figures[key] for r in self.runs if key in r.figures]
        values = [v for v in values if v == v]  # drop NaN
        return Summary.of(values) if values else None

    def cpu_median(self, key: str, name: str) -> float | None:
        values = [v for r in self.runs if (v := r.cpu.get(key, {}).get(name)) is not None]
        return median(values) if values else None


async def wait_quiet(ctx: Context) -> float | None:
    """CPU of other processes (% of one core) over 1 s, waiting while it is above the limit."""
    deadline = now() + ctx.options.quiet_wait_s
    while True:
        window = procstat.CpuWindow(
            {"server": ctx.target.server_pid, "postgres": ctx.target.pg_pid}
        ).start()
        await asyncio.sleep(1.0)
        other = window.stop().get("other")
        if other is None or other <= ctx.options.quiet_limit or now() >= deadline:
            return other
        log(f"other processes use {other:.0f}% of a core; waiting for a quieter machine")
        await asyncio.sleep(2.0)


# Scenarios that measure --baseline's server themselves ((x): a side of every step), or
# that keep per-server state across runs: run against this checkout's server only.
OWN_BASELINE = frozenset({"x", "y", "z", "i"})


def sides(ctx: Context, letter: str, run: int) -> list[tuple[str, Target | None]]:
    """Who each run measures, in order: this checkout's server (None), and the baseline
    (--baseline) going first every other run."""
    if ctx.baseline is None or letter in OWN_BASELINE:
        return [("", None)]
    pair: list[tuple[str, Target | None]] = [("", None), ("baseline", ctx.baseline)]
    return pair[::-1] if run % 2 else pair


async def run_scenario(ctx: Context, letter: str) -> list[ScenarioOutcome]:
    scenario = SCENARIOS[letter]
    outcome = ScenarioOutcome(letter, scenario.title)
    outcomes = {"": outcome}
    if ctx.baseline is not None and letter not in OWN_BASELINE:
        outcomes["baseline"] = ScenarioOutcome(letter, scenario.title, side="baseline")
    for i in range(ctx.sizes.runs):
        for side, target in sides(ctx, letter, i):
            at = f" [{side}]" if side else ""
            log(f"({letter}) {scenario.title}{at}: run {i + 1} of {ctx.sizes.runs}")
            this = outcomes[side]
            if this.error is not None:
                continue
            try:
                with ctx.against(target) if target is not None else contextlib.nullcontext():
                    background = await wait_quiet(ctx)
                    result = await scenario.run(ctx, i)
                result.extra["other_cpu_before_run"] = background
                this.runs.append(result)
            except Exception as exc:
                this.error = f"{type(exc).__name__}: {exc}"
                log(f"({letter}){at} FAILED: {this.error}\n{traceback.format_exc()}")
            await asyncio.sleep(PAUSE_BETWEEN_RUNS_S)
    if letter in ctx.options.profile and outcome.error is None:
        log(f"({letter}) one more run under py-spy (not counted)")
        ctx.profile_label = letter
        try:
            await wait_quiet(ctx)
            await scenario.run(ctx, ctx.sizes.runs)
        except Exception as exc:
            outcome.profile_error = f"{type(exc).__name__}: {exc}"
            log(f"({letter}) profiled run failed: {outcome.profile_error}")
        finally:
            ctx.profile_label = None
    return list(outcomes.values())


async def run_all(ctx: Context) -> list[ScenarioOutcome]:
    if ctx.options.ceilings:
        log("measuring the in-run ceilings")
        await wait_quiet(ctx)
        ctx.ceilings = await measure_all(ctx)
    return [o for letter in ctx.options.scenarios for o in await run_scenario(ctx, letter)]


def rows(ctx: Context, outcomes: list[ScenarioOutcome]) -> list[Row]:
    out: list[Row] = []
    for o in outcomes:
        label = o.label
        for f in SCENARIOS[o.letter].figures(ctx.sizes):
            summary = o.summary(f.key)
            error = o.error if summary is None else None
            if summary is None and error is None:
                error = "not measured"
            bounds = o.ceiling(ctx, f.key)[1], o.combined(ctx, f.key)[1]
            out.append(Row(label, f.label, f.unit, summary, error, *bounds))
    return out


def cpu_rows(ctx: Context, outcomes: list[ScenarioOutcome], cores: int) -> list[CpuRow]:
    out: list[CpuRow] = []
    for o in outcomes:
        seen: set[tuple[float | None, ...]] = set()
        for f in SCENARIOS[o.letter].figures(ctx.sizes):
            names = ("server", "server_busiest", "postgres", "loadgen", "other", "machine")
            values = tuple(o.cpu_median(f.key, n) for n in names)
            if all(v is None for v in values) or values in seen:
                continue  # figures sharing one window ((d), (e)) show it once
            seen.add(values)
            label = f.label if len(SCENARIOS[o.letter].figures(ctx.sizes)) > 1 else "-"
            if o.letter in ("d", "e", "g", "h", "k", "l"):
                label = "measured window"
            server, busiest, postgres, loadgen, other, machine = values
            sampler = o.cpu_median(f.key, "pg_sampler")  # the bench's own PostgreSQL backend
            if loadgen is not None and sampler is not None:
                loadgen = round(loadgen + sampler, 1)
            scenario = f"({o.letter})" + (f" [{o.side}]" if o.side else "")
            out.append(
                CpuRow(scenario, label, server, busiest, postgres, loadgen, other, machine, cores)
            )
    return out
