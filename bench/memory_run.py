"""Memory at rest of a started server, the way a user starts it (issue 31, part 4).

    .venv/bin/python -m bench.memory_run                       # this checkout, every mode
    .venv/bin/python -m bench.memory_run --source before=/work/wt-base --source after=.
    .venv/bin/python -m bench.memory_run --modes serve --settle 10 --json mem.json
    python -m bench.memory_run --env JWT_ENABLED=true --env JWT_SECRET=$(openssl rand -hex 32)

Modes: `serve` is `queen-threads serve` with DATABASE_URL set; `gunicorn` is
`python -m gunicorn -c config/gunicorn.conf.py queen_threads.wsgi:app`; `embedded` is
`queen-threads serve` without a database (it starts its own PostgreSQL, counted apart).
Each server gets NUM_WORKERS (default 2), is waited for until /health says ready, left
alone `--settle` seconds, then every process of its tree is read (bench/memory.py).
A `--source LABEL=DIR` runs the code of another checkout (PYTHONPATH=DIR, the same venv),
so that before and after are measured in one run, on one machine state.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.memory import TreeMemory, mb, tree_memory
from bench.server import _SCRUB, postmaster_pid, wait_healthy
from queen_threads.embedded import EmbeddedPostgres, free_port
from queen_threads.paths import ROOT

MODES = ("serve", "gunicorn", "embedded")


def command(mode: str, source: Path) -> list[str]:
    if mode == "gunicorn":
        config = source / "config" / "gunicorn.conf.py"
        return [sys.executable, "-m", "gunicorn", "-c", str(config), "queen_threads.wsgi:app"]
    return [str(Path(sys.executable).parent / "queen-threads"), "serve"]


def server_env(
    source: Path, port: int, workers: int, dsn: str | None, data: Path
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB and not k.startswith("PG_")}
    env.update(PYTHONPATH=str(source), HOST="127.0.0.1", PORT=str(port),
               NUM_WORKERS=str(workers), LOG_LEVEL="warn")  # fmt: skip
    if dsn:
        env["DATABASE_URL"] = dsn
    else:
        env["QUEEN_DATA_DIR"] = str(data)
    return env


def run_one(
    mode: str,
    source: Path,
    workers: int,
    dsn: str | None,
    tmp: Path,
    settle_s: float,
    extra: dict[str, str] | None = None,
) -> TreeMemory:
    """Start one server, wait until it is ready and `settle_s` more, read it, stop it."""
    port = free_port()
    data = tmp / f"data-{port}"
    log_path = tmp / f"server-{port}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            command(mode, source),
            env=server_env(source, port, workers, None if mode == "embedded" else dsn, data)
            | (extra or {}),
            cwd=source, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_healthy(f"http://127.0.0.1:{port}", 90, proc)
        time.sleep(settle_s)
        pg_root = postmaster_pid(data / "pgdata") if mode == "embedded" else None
        return tree_memory(proc.pid, pg_root)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}\n{log_path.read_text(errors='replace')[-3000:]}") from exc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def render(label: str, mode: str, found: TreeMemory) -> str:
    lines = [f"{label} / {mode}: server PSS {mb(found.total())} MB, "
             f"RSS {mb(found.total('rss_kb'))} MB, USS {mb(found.total('uss_kb'))} MB"
             + (f"; PostgreSQL apart: PSS {mb(found.total(of='pg'))} MB "
                f"({len(found.pg)} processes)" if found.pg else "")]  # fmt: skip
    for p in found.server:
        lines.append(
            f"  {p.role:<8} pid {p.pid:>7}  PSS {mb(p.pss_kb):>6}  RSS {mb(p.rss_kb):>6}  "
            f"USS {mb(p.uss_kb):>6}  (PSS anon {mb(p.pss_anon_kb)}, file {mb(p.pss_file_kb)})"
        )
    return "\n".join(lines)


def parse_sources(values: list[str]) -> list[tuple[str, Path]]:
    sources = []
    for value in values or [f"this={ROOT}"]:
        label, _, folder = value.rpartition("=")
        path = Path(folder).resolve()
        if not (path / "queen_threads").is_dir():
            raise SystemExit(f"memory_run: {path} is not a queen-threads checkout")
        sources.append((label or path.name, path))
    return sources


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory_run", description=__doc__)
    parser.add_argument("--source", action="append", default=[], help="LABEL=DIR, repeatable")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds idle before reading")
    parser.add_argument("--rounds", type=int, default=1, help="repeat every source and mode")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    parser.add_argument("--json", help="write every reading to this file")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes {sorted(unknown)}; known: {', '.join(MODES)}")
    sources = parse_sources(args.source)
    extra = dict(item.split("=", 1) for item in args.env)
    tmp = Path(tempfile.mkdtemp(prefix="queen-memory-"))
    pg = EmbeddedPostgres(tmp / "pg")
    results: list[dict[str, object]] = []
    try:
        dsn = pg.start() if set(modes) - {"embedded"} else None
        for rnd in range(args.rounds):
            for mode in modes:
                for label, source in sources:
                    found = run_one(mode, source, args.workers, dsn, tmp, args.settle, extra)
                    print(render(label, mode, found), flush=True)
                    results.append({"round": rnd, "source": label, "mode": mode,
                                    "workers": args.workers} | found.as_dict())  # fmt: skip
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
