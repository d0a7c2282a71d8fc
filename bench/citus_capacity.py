"""(v) What a Citus cluster carries with 1 and with 2 workers, every node held to the same CPU
(issue 44, part 4; docs/scaling.md, "Capacity model for N workers").

For each configuration a local cluster (tests/support/citus.py: the coordinator and 1 or 2
workers registered, 8 shards) is migrated and served by one queen-threads server (not held);
each node's processes go into a cgroup (v1 `cpu`) of their own with the same quota
(`--capacity-cpu`, a fraction of a core). Then, for a few seconds each: pushes of 1000
messages (2 connections per worker, 16 partitions) and pops of 100 with their acks (4
consumers per worker, the queue prefilled), counting what completes and each node's CPU.

The model (docs/scaling.md) says the rate is the workers' CPU over a worker's cost per
message while the coordinator keeps up: twice with 2 workers, as long as the coordinator's
quota covers what it spends per message (its share, measured here, is about a fifth of a
worker's). Figures: the rates, their ratio, each node's CPU as a share of its quota (a node
at its quota is what held the rate), and the ratio the model predicts from the measured
costs (min(2, what the coordinator's quota allows)).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import procstat, server
from bench.common import BenchError, Context, Figure, RunResult, check_pushed, expect, log, now
from bench.common import prefill as prefill_queue
from bench.consume import ack_messages
from bench.httpclient import Connection, close_all
from bench.options import Sizes
from bench.server import Target
from queen_threads import migrate
from queen_threads.embedded import free_port
from tests.support.citus import NODES, CitusCluster, unavailable

CGROUP_CPU = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000
PARTITIONS = 16
OPS = ("push1000", "popack100")
WORKER_COUNTS = (1, 2)


def capacity_figures(sizes: Sizes) -> list[Figure]:
    out: list[Figure] = []
    for op in OPS:
        for n in WORKER_COUNTS:
            label = f"{op}, {n} worker(s)"
            out += [
                Figure(f"{op}_w{n}_rate", f"{label}: messages", "msg/s"),
                Figure(f"{op}_w{n}_workers_pct", f"{label}: workers' CPU of their quota", "%"),
                Figure(f"{op}_w{n}_coord_pct", f"{label}: coordinator's CPU of its quota", "%"),
            ]
        out += [
            Figure(f"{op}_ratio", f"{op}: rate with 2 workers / with 1", "x"),
            Figure(f"{op}_model_ratio", f"{op}: the model's ratio from the measured costs", "x"),
        ]
    return out


def cgroups_unavailable() -> str | None:
    if (reason := unavailable()) is not None:
        return reason
    if not (CGROUP_CPU / "cpu.cfs_quota_us").exists():
        return f"no cgroup v1 cpu controller at {CGROUP_CPU}"
    if not os.access(CGROUP_CPU, os.W_OK):
        return f"cannot create cgroups under {CGROUP_CPU} (run as root)"
    return None


@dataclass
class HeldNode:
    """A node's cgroup: every process of its postmaster's tree, new backends included."""

    name: str
    root: int
    cpu: float
    path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.path = CGROUP_CPU / f"queen-bench-v-{os.getpid()}-{self.name}"
        self.path.mkdir(exist_ok=True)
        (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (self.path / "cpu.cfs_quota_us").write_text(str(int(self.cpu * PERIOD_US)))
        self.hold()

    def hold(self) -> None:
        table = procstat.process_table()
        for pid in procstat.tree(self.root, table):
            with contextlib.suppress(OSError):  # (a backend that just ended)
                (self.path / "cgroup.procs").write_text(str(pid))

    def release(self) -> None:
        with contextlib.suppress(OSError):
            for pid in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (CGROUP_CPU / "cgroup.procs").write_text(pid)
            self.path.rmdir()


class HeldCluster:
    """A cluster with `workers` workers registered, each node held to `cpu` of a core, and a
    server in front of the coordinator."""

    def __init__(self, ctx: Context, workers: int, cpu: float) -> None:
        self.ctx, self.workers, self.cpu = ctx, workers, cpu
        self.folder = Path(tempfile.mkdtemp(prefix="queen-bench-v-"))
        self.folder.chmod(0o755)
        self.cluster = CitusCluster(self.folder / "citus")
        self.held: list[HeldNode] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.target: Target | None = None

    def start(self) -> None:
        self.cluster.start()
        dsn = self.cluster.create_database("queen", workers=self.workers)
        migrate.migrate(dsn)
        nodes = NODES[: 1 + self.workers]
        for node in nodes:
            pid = server.postmaster_pid(self.cluster.folder / node)
            assert pid is not None
            self.held.append(HeldNode(node, pid, self.cpu))
        port = free_port()
        env = server.base_env(self.ctx.options, port, dsn)
        env["TIMERS_MAX_SLEEP_MS"] = "60000"
        url = f"http://127.0.0.1:{port}"
        log_path = self.folder / "server.log"
        self.proc = server.spawn("queen_threads.wsgi:app", env, log_path, url)
        self.target = Target(url, self.proc.pid, None, dsn, True,
                             {k: v for k, v in env.items() if k != "DATABASE_URL"},
                             str(log_path))  # fmt: skip

    def cpu_window(self) -> procstat.CpuWindow:
        for node in self.held:
            node.hold()  # (backends started since)
        return procstat.CpuWindow({n.name: n.root for n in self.held}).start()

    def stop(self) -> None:
        if self.proc is not None:
            server.stop_all([self.proc])
        for node in self.held:
            node.release()
        with contextlib.suppress(Exception):
            self.cluster.stop("fast")
        shutil.rmtree(self.folder, ignore_errors=True)


async def _push_load(ctx: Context, held: HeldCluster, seconds: float) -> dict[str, Any]:
    queue = ctx.queue("v", f"push-w{held.workers}")
    conns = await ctx.connect(2 * held.workers)
    batch = ctx.sizes.push_batch
    seq = 0

    async def push(conn: Connection, end: float, i: int) -> int:
        nonlocal seq
        n = 0
        while now() < end:
            body = ctx.push_body(queue, f"p{(i + n * len(conns)) % PARTITIONS}", seq, batch)
            seq += batch
            raw = conn.render("POST", "/api/v1/push", body)
            check_pushed(await conn.request_raw(raw, "POST"), batch, "capacity push")
            n += 1
        return n * batch

    try:
        warm = now() + 2
        await asyncio.gather(*(push(c, warm, i) for i, c in enumerate(conns)))
        window = held.cpu_window()
        end = now() + seconds
        done = sum(await asyncio.gather(*(push(c, end, i) for i, c in enumerate(conns))))
        return {"messages": done, "cpu": window.stop()}
    finally:
        await close_all(conns)


async def _popack_load(ctx: Context, held: HeldCluster, seconds: float) -> dict[str, Any]:
    queue = ctx.queue("v", f"pop-w{held.workers}")
    await prefill_queue(ctx, queue, ctx.sizes.capacity_prefill, PARTITIONS)
    conns = await ctx.connect(4 * held.workers)
    path = ctx.pop_path(queue, batch=ctx.sizes.pop_batch, wait="false")

    async def consume(conn: Connection, end: float) -> int:
        done = 0
        while now() < end:
            popped_at = now()
            response = await conn.request_raw(conn.render("GET", path))
            if response.status == 204:
                raise BenchError("capacity: the queue ran dry; raise --capacity-prefill")
            messages = [m for m in expect(response, 200, "pop").json().get("messages") or [] if m]
            await ack_messages(conn, messages, None, popped_at)
            done += len(messages)
        return done

    try:
        warm = now() + 2
        await asyncio.gather(*(consume(c, warm) for c in conns))
        window = held.cpu_window()
        end = now() + seconds
        done = sum(await asyncio.gather(*(consume(c, end) for c in conns)))
        return {"messages": done, "cpu": window.stop()}
    finally:
        await close_all(conns)


LOADS = {"push1000": _push_load, "popack100": _popack_load}


def _figures(op: str, n: int, measured: dict[str, Any], cpu: float) -> dict[str, float]:
    window = measured["cpu"]
    seconds = window.get("seconds") or 1.0
    workers = [window.get(f"worker{k}") or 0.0 for k in range(1, n + 1)]
    quota_pct = cpu * 100
    return {
        f"{op}_w{n}_rate": round(measured["messages"] / seconds, 1),
        f"{op}_w{n}_workers_pct": round(sum(workers) / (n * quota_pct) * 100, 1),
        f"{op}_w{n}_coord_pct": round((window.get("coordinator") or 0.0) / quota_pct * 100, 1),
    }


def _model_ratio(op: str, by_n: dict[int, dict[str, Any]]) -> float | None:
    """min(2, what the coordinator's quota carries over what 2 workers' quotas carry): each
    node's CPU per message from the 1-worker window (the model's C_w and C_co)."""
    one = by_n.get(1)
    if one is None or not one["messages"]:
        return None
    window = one["cpu"]
    seconds = window.get("seconds") or 1.0
    per_msg_w = (window.get("worker1") or 0.0) * seconds / one["messages"]
    per_msg_co = (window.get("coordinator") or 0.0) * seconds / one["messages"]
    if per_msg_w <= 0:
        return None
    if per_msg_co <= 0:
        return 2.0
    return round(min(2.0, per_msg_w / per_msg_co), 2)


async def citus_capacity(ctx: Context, run: int) -> RunResult:
    reason = cgroups_unavailable()
    if reason is not None:
        raise BenchError(f"(v) cannot run here: {reason}")
    cpu = ctx.sizes.capacity_cpu
    result = RunResult()
    measured: dict[str, dict[int, dict[str, Any]]] = {op: {} for op in OPS}
    for n in WORKER_COUNTS:
        log(f"(v) run {run + 1}: {n} worker(s), every node held to {cpu:g} of a core")
        held = HeldCluster(ctx, n, cpu)
        try:
            await asyncio.to_thread(held.start)
            assert held.target is not None
            with ctx.against(held.target):
                for op in OPS:
                    got = await LOADS[op](ctx, held, ctx.sizes.duration_s)
                    measured[op][n] = got
                    result.figures |= _figures(op, n, got, cpu)
                    log(f"(v) {op}, {n} worker(s): {result.figures[f'{op}_w{n}_rate']} msg/s, "
                        f"cpu {got['cpu']}")  # fmt: skip
        finally:
            await asyncio.to_thread(held.stop)
    for op in OPS:
        rates = [result.figures.get(f"{op}_w{n}_rate") for n in WORKER_COUNTS]
        if all(rates):
            result.figures[f"{op}_ratio"] = round(rates[1] / rates[0], 2)  # type: ignore[operator]
        model = _model_ratio(op, measured[op])
        if model is not None:
            result.figures[f"{op}_model_ratio"] = model
    result.extra["measured"] = measured
    return result
