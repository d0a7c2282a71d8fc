"""(p): the pop autopilot against fixed settings, each phase (backlog, trickle) with each pop
configuration in turn; the parts are bench/autopilot.py (configurations, consumers,
figures), autopilot_backlog.py and autopilot_trickle.py."""

from __future__ import annotations

from bench.autopilot import configs, figure_key, phases, turned
from bench.autopilot_backlog import backlog
from bench.autopilot_trickle import trickle
from bench.common import Context, RunResult


async def autopilot_vs_fixed(ctx: Context, run: int) -> RunResult:
    result = RunResult()
    measures = {"backlog": backlog, "trickle": trickle}
    for phase in phases(ctx.sizes):
        measure = measures[phase]
        for config in turned(configs(ctx.sizes), run):
            figures, cpu, extra = await measure(ctx, run, config)
            for metric, value in figures.items():
                key = figure_key(phase, config.name, metric)
                result.figures[key] = value
                result.cpu[key] = cpu
            result.extra[f"{phase}_{config.name}"] = extra
    return result
