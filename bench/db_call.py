"""What one database call of the request pool costs, with and without its measuring point.

A tight loop of the cheapest named statement (`ping`, `SELECT 1`) through a plain
`Database` and through the one `Runtime` builds (every call measured: the statement's
duration in queen_db_query_duration_seconds and the JSON counters), alternating, round
after round, in one process. Per call: the median and the minimum over the rounds of the
wall time and of this process's CPU time. The measuring point costs CPU on the caller's
side; the round trip is the same for both, and on a busy machine its noise can hide the
difference, so `--no-database` runs the same code with a stand-in connection in place of
the driver's (no round trip: the Python path alone).

    .venv/bin/python -m bench.db_call --dsn postgresql://... [--calls 20000] [--rounds 9]
    .venv/bin/python -m bench.db_call --no-database

One JSON line: {plain, metered, overhead} with `wallUs`, `cpuUs` (medians) and `minWallUs`,
`minCpuUs` per call. With a database it needs no schema.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from contextlib import nullcontext
from typing import Any

from queen_threads.db import Database
from queen_threads.runtime import Runtime, pool_config
from queen_threads.settings import load_settings

NOWHERE = "postgresql://nobody@127.0.0.1:1/none"


class _Cursor:
    """Stands in for a driver cursor: `ping` answers one row."""

    rowcount = 1

    def execute(self, sql: str, params: Any = None) -> None:
        pass

    def fetchone(self) -> tuple[int]:
        return (1,)


class _Connection:
    closed = 0

    def cursor(self) -> nullcontext[_Cursor]:
        return nullcontext(_Cursor())


def without_database(db: Database) -> None:
    """`db`'s pool hands out the stand-in connection (nothing else of `db` changes)."""
    conn = _Connection()
    db.pool.acquire = lambda: conn  # type: ignore[method-assign,assignment,return-value]
    db.pool.release = lambda conn, broken=False: None  # type: ignore[method-assign]


def loop(db: Database, calls: int) -> tuple[float, float]:
    """(wall, cpu) seconds of `calls` pings."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        db.value("ping")
    return time.perf_counter() - wall, time.process_time() - cpu


def _per_call(runs: list[tuple[float, float]], calls: int) -> dict[str, float]:
    walls, cpus = [w / calls * 1e6 for w, _ in runs], [c / calls * 1e6 for _, c in runs]
    return {"wallUs": round(statistics.median(walls), 2),
            "cpuUs": round(statistics.median(cpus), 2),
            "minWallUs": round(min(walls), 2), "minCpuUs": round(min(cpus), 2)}  # fmt: skip


def measure(dsn: str | None, calls: int, rounds: int) -> dict[str, Any]:
    """Both loops, alternating; `dsn` None: the stand-in connection."""
    with tempfile.TemporaryDirectory(prefix="bench-db-call-") as folder:
        settings = load_settings({"FILE_BUFFER_DIR": folder}, dotenv_path=None)
        metered = Runtime(settings, dsn or NOWHERE).db  # as every worker builds it
        plain = Database(pool_config(settings, dsn or NOWHERE))
        if dsn is None:
            without_database(plain)
            without_database(metered)
        try:
            for db in (plain, metered):
                loop(db, calls // 10)  # warm: the connection, the statement's plan
            times: dict[str, list[tuple[float, float]]] = {"plain": [], "metered": []}
            for _ in range(rounds):
                for name, db in (("plain", plain), ("metered", metered)):
                    times[name].append(loop(db, calls))
        finally:
            plain.close()
            metered.close()
    per_call = {name: _per_call(runs, calls) for name, runs in times.items()}
    overhead = {
        key: round(per_call["metered"][key] - per_call["plain"][key], 2)
        for key in per_call["plain"]
    }
    return {**per_call, "overhead": overhead, "database": dsn is not None, "calls": calls,
            "rounds": rounds}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--dsn")
    where.add_argument("--no-database", action="store_true")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    print(json.dumps(measure(args.dsn, args.calls, args.rounds)))


if __name__ == "__main__":
    main()
