"""Entry point of `scripts/bench`: set up the target, run the scenarios, print and save."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shlex
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from bench import machine, report, server
from bench.common import Context, log
from bench.options import Options, parse_args
from bench.original import DEFAULT_RUN, OriginalServer
from bench.profile import parse_collapsed, summarise, summary_markdown
from bench.runner import ScenarioOutcome, cpu_rows, rows, run_all


def server_log_problems(path: str | None, limit: int = 20) -> list[str]:
    """Error lines and tracebacks the started server logged during the run."""
    if not path:
        return []
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return []
    bad = [
        ln
        for ln in lines
        if '"level":"error"' in ln or '"level":"critical"' in ln or "Traceback" in ln
    ]
    return bad[-limit:]


def render(ctx: Context, outcomes: list[ScenarioOutcome], cores: int) -> str:
    parts = [report.results_table(rows(ctx, outcomes))]
    if ctx.ceilings:
        parts += ["", "In-run ceilings (measured once, before the scenarios):", "",
                  report.ceilings_table(list(ctx.ceilings.values()))]  # fmt: skip
    cpu = cpu_rows(ctx, outcomes, cores)
    if cpu:
        parts += [
            "",
            "CPU during each measured window, % of one core (median of runs):",
            "",
            report.cpu_table(cpu),
        ]
    for label, summary in ctx.profiles.items():
        parts += ["", summary_markdown(label, summary)]
    return "\n".join(parts)


def cpu_profile_summary(folder: Path) -> dict[str, Any]:
    """The CPU-time stacks of every worker (bench/cpu_profile_conf.py), summarised."""
    stacks = [s for path in folder.glob("w*.txt") for s in parse_collapsed(path.read_text())]
    summary = summarise(stacks).as_dict()
    summary["files"] = sorted(str(p) for p in folder.glob("w*.txt"))
    return summary


def start_original(options: Options, target: server.Target) -> tuple[Options, OriginalServer]:
    """--original: the original server beside the target, as (x)'s other server."""
    if not target.dsn:
        raise RuntimeError("--original needs the database (--database-url with --url)")
    original = OriginalServer(options.original_run or DEFAULT_RUN, target.dsn, target.pg_pid,
                              options.workers)  # fmt: skip
    other = original.start()
    log(f"the original server: {other.url}, pid {other.server_pid}, db {original.database}")
    sizes = replace(options.sizes, mixed_other_url=other.url, mixed_other_database_url=other.dsn)
    return replace(options, sizes=sizes), original


def bench(options: Options) -> int:
    server.raise_fd_limit()
    managed = server.ManagedServer(options) if options.start_server else None
    original: OriginalServer | None = None
    started = time.time()
    try:
        if managed is not None:
            log("starting embedded PostgreSQL and the server")
        target = managed.start() if managed is not None else server.attach(options)
        log(f"target {target.url} (server pid {target.server_pid}, postgres pid {target.pg_pid})")
        if options.original_run is not None:
            options, original = start_original(options, target)
        baseline = None
        if options.baseline:
            assert managed is not None  # (options: not with --url)
            baseline = managed.start_baseline(Path(options.baseline))
            log(f"the baseline server ({options.baseline}) at {baseline.url}")
            options = replace(options, sizes=replace(options.sizes, mixed_baseline=True))
        info: dict[str, Any] = {
            "command": "scripts/bench " + shlex.join(options.argv),
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine.machine(),
            "postgres": machine.postgres(target.dsn),
            "code": machine.code_version(),
            "server": {
                "url": target.url,
                "started_by_bench": target.started_here,
                "env": target.server_env,
                "workers": options.workers if target.started_here else None,
                "auth_twin_env": target.auth_twin.server_env if target.auth_twin else None,
            },
            "sizes": options.sizes.__dict__,
            "baseline": options.baseline,
        }
        ctx = Context(options, target)
        ctx.baseline = baseline
        try:
            outcomes = asyncio.run(run_all(ctx))
        finally:
            ctx.close()
        problems = server_log_problems(target.log_path)
        if baseline is not None:
            problems += server_log_problems(baseline.log_path)
        if target.auth_twin is not None:
            problems += server_log_problems(target.auth_twin.log_path)
    finally:
        if original is not None:
            original.stop()
        if managed is not None:
            managed.stop()
    if options.cpu_profile:  # the workers wrote their stacks when the server stopped
        ctx.profiles["cpu (whole run)"] = cpu_profile_summary(Path(options.cpu_profile))
    cores = int(info["machine"]["cores"] or 1)
    print(render(ctx, outcomes, cores))
    info["elapsed_s"] = round(time.time() - started, 1)
    info["scenarios"] = {o.key: o.as_dict(ctx) for o in outcomes}
    info["ceilings"] = {k: r.as_dict() for k, r in ctx.ceilings.items()}
    info["profiles"] = ctx.profiles
    info["postgres_waits"] = ctx.pg_waits
    info["server_log_problems"] = problems
    if problems:
        log(f"the server logged {len(problems)} error line(s); last: {problems[-1][:300]}")
    if options.json_path:
        Path(options.json_path).write_bytes(
            orjson.dumps(info, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
        )
        log(f"raw numbers written to {options.json_path}")
    log(f"done in {info['elapsed_s']:.0f}s")
    return 1 if any(o.error for o in outcomes) else 0


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")  # pgserver's platformdirs
    options = parse_args(sys.argv[1:] if argv is None else argv)
    if sys.platform != "linux":
        print("scripts/bench reads /proc and runs on Linux only", file=sys.stderr)
        return 2
    try:
        return bench(options)
    except KeyboardInterrupt:
        return 130
    except (RuntimeError, OSError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
