"""(q) SQL cost per call (issue 41, part 3): what each hot stored-function call costs
PostgreSQL, without the server: the named statements the server runs for a push, a pop and
an ack (schema/queries.sql), called the way queue/store.py calls them, one at a time on one
connection of a PostgreSQL of its own (bench/sqlcost_db.py).

Per call kind, at two sizes (a queue of 8 partitions in a fresh database; the same after
`sqlcost_partitions` one-message partitions of another queue were added):
- PostgreSQL CPU per call: the backend's own CPU time from `/proc/<pid>/schedstat`
  (nanoseconds, read between calls while the backend waits for the next one), so neither
  the machine's other load nor the client's time counts;
- wall time per call (the client's clock: it does depend on the machine's load);
- SQL statements per call: what `pg_stat_statements` (track = all) counted for the call,
  nested statements included (every statement of a function, a trigger, a foreign-key
  check; the call's own statement is one), over `sqlcost_count_calls` calls per kind made
  apart from the timed ones. A PL/pgSQL expression simple enough to skip the executor
  (`v := a + 1`) is not a statement there.

With `--sqlcost-baseline DIR` (a checkout of another revision, e.g. `git worktree add
/tmp/base main`) a second database is migrated by that checkout and called through its
named statements, and each round measures both, alternating which goes first: before and
after in one run (the figures prefixed `base`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Context, Figure, RunResult, log
from bench.options import Sizes
from bench.sqlcost_calls import KINDS, Caller, Workload
from bench.sqlcost_db import Databases, Side

RESOURCE = "sqlcost"
LABELS = {
    "push_partition": "push of 1 message, known partition (push_partition)",
    "push_messages": "push of 1 message, general (push_messages)",
    "pop_batch": "pop of the queue, batch 10 (pop_batch)",
    "ack_partition": "ack of that batch (ack_partition)",
    "pop_partition": "pop of a named partition, batch 10 (pop_partition)",
    "ack_messages": "ack of that batch, general (ack_messages)",
}
METRICS = (("cpu", "PostgreSQL CPU", "ms/call"), ("wall", "wall", "ms/call"),
           ("stmts", "SQL statements", "/call"))  # fmt: skip


def size_names(sizes: Sizes) -> tuple[tuple[str, str], ...]:
    """(key, label) of the two sizes."""
    return (("small", "8 partitions"),
            ("large", f"+{sizes.sqlcost_partitions:,} partitions"))  # fmt: skip


def sides_of(sizes: Sizes) -> tuple[str, ...]:
    return ("new", "base") if sizes.sqlcost_baseline else ("new",)


def figure_key(side: str, size: str, kind: str, metric: str) -> str:
    return f"{'base_' if side == 'base' else ''}{size}_{kind}_{metric}"


def sqlcost_figures(sizes: Sizes) -> list[Figure]:
    out = []
    for size, size_label in size_names(sizes):
        for kind in KINDS:
            for metric, what, unit in METRICS:
                for side in sides_of(sizes):
                    prefix = "before: " if side == "base" else ""
                    label = f"{prefix}{size_label}, {LABELS[kind]}: {what}"
                    out.append(Figure(figure_key(side, size, kind, metric), label, unit))
    return out


def databases(ctx: Context) -> Databases:
    dbs = ctx.resources.get(RESOURCE)
    if dbs is None:
        dbs = Databases(keep=ctx.options.keep).start()
        ctx.closers.append(dbs.stop)
        ctx.resources[RESOURCE] = dbs
        if not dbs.counting:
            log(f"(q) statements are not counted: {dbs.reason}")
    assert isinstance(dbs, Databases)
    return dbs


def run_sizes(
    sizes: Sizes, dbs: Databases, sides: list[Side], run: int, say: Callable[[str], None]
) -> tuple[dict[str, float], dict[str, Any]]:
    """Every size's rounds over `sides`, alternating their order round by round (and by
    run); the figures and what else is worth keeping."""
    figures: dict[str, float] = {}
    extra: dict[str, Any] = {"postgres": dbs.postgres, "counting": dbs.counting,
                             "not_counted_because": dbs.reason, "statements": {}}  # fmt: skip
    callers = {s.name: Caller(s, dbs.counting) for s in sides}
    try:
        loads = {name: Workload(c, sizes) for name, c in callers.items()}
        for load in loads.values():
            load.setup()
        for size, size_label in size_names(sizes):
            if size == "large":
                for load in loads.values():
                    load.fill(sizes.sqlcost_partitions)
            for r in range(sizes.sqlcost_rounds):
                order = list(loads) if (r + run) % 2 == 0 else list(reversed(loads))
                for name in order:
                    loads[name].round()
            for name, load in loads.items():
                for kind in KINDS:
                    got = load.take(kind)
                    for metric in ("cpu", "wall", "stmts"):
                        value = got.get(metric)
                        if value is not None:
                            figures[figure_key(name, size, kind, metric)] = value
                    extra["statements"][f"{name}/{size}/{kind}"] = got.get("texts", [])
                say(f"(q) {size_label}, {name}: " + ", ".join(
                    f"{k} {figures.get(figure_key(name, size, k, 'cpu'), float('nan')):.3f} ms"
                    for k in KINDS))  # fmt: skip
    finally:
        for caller in callers.values():
            caller.close()
    return figures, extra


async def sql_cost(ctx: Context, run: int) -> RunResult:
    sizes = ctx.sizes
    dbs = await asyncio.to_thread(databases, ctx)
    baseline = Path(sizes.sqlcost_baseline) if sizes.sqlcost_baseline else None
    sides = [await asyncio.to_thread(dbs.side, "new", None)]
    if baseline is not None:
        sides.append(await asyncio.to_thread(dbs.side, "base", baseline))
    figures, extra = await asyncio.to_thread(run_sizes, sizes, dbs, sides, run, log)
    return RunResult(figures=figures, extra=extra)
