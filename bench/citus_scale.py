"""(z) queen-threads on Citus against plain PostgreSQL 15, in one run (issue 33, part 6).

Starts a local Citus cluster (coordinator + 2 workers) and a plain PostgreSQL 15 of the same
machine with the same settings (bench/citus_nodes.py), each behind its own queen-threads
server, and for each operation measures one side after the other (the order alternates by
run, so that drift of the machine favours neither):

- the CPU per operation of every PostgreSQL node (`/proc` of each postmaster's tree over the
  measured window): plain PostgreSQL's, the coordinator's, each worker's; and the server's;
- the round trips per operation on the cluster: the commands `citus.log_remote_commands`
  logged on every node (one line per command sent to a node and waited for), in a separate
  window of requests sent one at a time (logging costs CPU: not in the CPU window).

Operations: push of 1 message per request, push of 1000 per request, pop (batch 100) + its
ack, of the queue and of a named partition; and three SQL probes without the server, the
floor of any design: a one-row INSERT that names its distribution key (a router query), a
call of a function delegated by its distribution argument (`create_distributed_function`)
that stores one row, and one that stores 1000 rows from a jsonb argument the size of a
batched push's items.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson
import psycopg2

from bench import procstat
from bench.citus_nodes import ScalePair, Side, cpu_ms_per_op
from bench.common import BenchError, Context, Figure, RunResult, check_pushed, expect, log, now
from bench.common import prefill as prefill_queue
from bench.consume import ack_messages
from bench.httpclient import Connection, HttpError, close_all
from bench.options import SCALE_OPS, Sizes

HTTP_OPS = ("push1", "push1000", "popack100", "popack100p")
OPS = SCALE_OPS  # HTTP_OPS, then the SQL probes
LABELS = {
    "push1": "push 1 msg/request",
    "push1000": "push 1000 msg/request",
    "popack100": "pop batch 100 + ack",
    "popack100p": "pop batch 100 of a named partition + ack",
    "sql_insert": "SQL one-row INSERT by key",
    "sql_call": "SQL delegated function call",
    "sql_call1000": "SQL delegated call storing 1000 rows",
}
# what one "request" of the round-trip window is, per operation
REQUEST_KINDS = {
    "push1": ("push1",),
    "push1000": ("push1000",),
    "popack100": ("pop100", "ack100"),
    "popack100p": ("pop100p", "ack100p"),
    "sql_insert": ("sql_insert",),
    "sql_call": ("sql_call",),
    "sql_call1000": ("sql_call1000",),
}
KIND_LABELS = {
    "pop100": "pop batch 100",
    "ack100": "ack of a batch of 100",
    "pop100p": "pop batch 100 of a named partition",
    "ack100p": "ack of a named partition's batch of 100",
} | LABELS
PAIR_KEY = "citus-pair"


def scale_figures(sizes: Sizes) -> list[Figure]:
    out: list[Figure] = []
    for op in sizes.scale_ops or OPS:
        label = LABELS[op]
        out += [
            Figure(f"{op}_plain_ms", f"{label}: plain PostgreSQL CPU per op", "ms"),
            Figure(f"{op}_coord_ms", f"{label}: Citus coordinator CPU per op", "ms"),
            Figure(f"{op}_coord_pct", f"{label}: coordinator / plain PostgreSQL", "%"),
            Figure(f"{op}_coord_net_pct", f"{label}: the same, net of each side's idle CPU", "%"),
            Figure(f"{op}_workers_ms", f"{label}: Citus workers' CPU per op (sum)", "ms"),
        ]
        for kind in REQUEST_KINDS[op]:
            out.append(
                Figure(f"{kind}_remote", f"{KIND_LABELS[kind]}: coordinator round trips", "count")
            )
        out += [
            Figure(f"{op}_plain_rate", f"{label}: plain PostgreSQL", "op/s"),
            Figure(f"{op}_citus_rate", f"{label}: Citus", "op/s"),
        ]
    return out


def node_ms(cpu: dict[str, float | None], nodes: list[str], ops: int) -> dict[str, float | None]:
    seconds = cpu.get("seconds")
    return {n: cpu_ms_per_op(cpu.get(n), seconds, ops) for n in nodes}


IDLE_S = 5.0  # the idle window of each side, per run


async def idle_cpu(side: Side) -> dict[str, float | None]:
    """% of a core each node uses with its server attached and no load (the server's
    background runs): what every per-operation figure of the side also carries."""
    window = procstat.CpuWindow(dict(side.nodes)).start()
    await asyncio.sleep(IDLE_S)
    return window.stop()


def net_ms(measured: dict[str, Any], idle: dict[str, float | None], node: str) -> float | None:
    """CPU ms per operation of `node` without its idle share over the window."""
    cpu, pct, rest = measured["cpu"], measured["cpu"].get(node), idle.get(node)
    if pct is None or rest is None:
        return None
    return cpu_ms_per_op(max(0.0, pct - rest), cpu.get("seconds"), measured["ops"])


class OpRunner:
    """One operation against one side: set up, drive for a time, send a few one by one."""

    def __init__(self, ctx: Context, side: Side, op: str, run: int) -> None:
        self.ctx, self.side, self.op, self.run = ctx, side, op, run
        self.sizes = ctx.sizes

    async def setup(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    async def drive(self, seconds: float) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    async def one(self, kind: str, i: int) -> None:  # pragma: no cover - overridden
        """One request of `kind` (REQUEST_KINDS), sent alone."""
        raise NotImplementedError

    async def warm(self, seconds: float) -> None:
        await self.drive(seconds)

    async def prime(self) -> None:
        """Before the round-trip window: what the connection's server process must have
        seen to take its steady path (nothing by default)."""

    async def close(self) -> None:
        return None


class PushRunner(OpRunner):
    def __init__(self, ctx: Context, side: Side, op: str, run: int) -> None:
        super().__init__(ctx, side, op, run)
        self.batch = 1 if op == "push1" else ctx.sizes.push_batch
        self.connections = (
            self.sizes.scale_single_connections if op == "push1" else self.sizes.scale_batch_clients
        )
        self.queue = ctx.queue("z", f"{side.name}-{op}-r{run}")
        self.conns: list[Connection] = []
        self.seq = 0

    async def setup(self) -> None:
        assert self.side.target is not None
        with self.ctx.against(self.side.target):
            self.conns = await self.ctx.connect(self.connections)

    async def _push(self, conn: Connection, partition: str) -> None:
        body = self.ctx.push_body(self.queue, partition, self.seq, self.batch)
        self.seq += self.batch
        response = await conn.request_raw(conn.render("POST", "/api/v1/push", body), "POST")
        check_pushed(response, self.batch, f"{self.side.name} push")

    async def drive(self, seconds: float) -> int:
        end = now() + seconds
        parts = self.sizes.scale_partitions

        async def worker(i: int, conn: Connection) -> int:
            n = 0
            while now() < end:
                await self._push(conn, f"p{(i + n * len(self.conns)) % parts}")
                n += 1
            return n

        return sum(await asyncio.gather(*(worker(i, c) for i, c in enumerate(self.conns))))

    async def one(self, kind: str, i: int) -> None:
        await self._push(self.conns[0], f"p{i % self.sizes.scale_partitions}")

    async def prime(self) -> None:
        # one push alone to each partition on the counting connection: its server process
        # learns the partition ids from the answers (under load the group commit folds
        # several partitions into one call, which teaches it nothing)
        for p in range(self.sizes.scale_partitions):
            await self._push(self.conns[0], f"p{p}")

    async def close(self) -> None:
        await close_all(self.conns)


class PopAckRunner(OpRunner):
    """Pop (batch 100, `wait=false`) and ack each batch. `popack100`: pops of the queue (any
    partition: the server finds a ready one); `popack100p`: pops that name the partition
    (consumer i takes partitions i, i + consumers, ...), which the server can send to the
    partition's node alone."""

    def __init__(self, ctx: Context, side: Side, op: str, run: int) -> None:
        super().__init__(ctx, side, op, run)
        self.named = op == "popack100p"
        self.queue = ctx.queue("z", f"{side.name}-{op}-r{run}")
        self.count_queue = ctx.queue("z", f"{side.name}-{op}-rt-r{run}")
        self.conns: list[Connection] = []
        self.pending: list[dict[str, Any]] = []  # popped by `one(<pop>)`, acked next

    async def setup(self) -> None:
        assert self.side.target is not None
        s = self.sizes
        with self.ctx.against(self.side.target):
            await prefill_queue(self.ctx, self.queue, s.scale_prefill, s.scale_partitions)
            # the round-trip window's own messages (the measured window may drain the queue),
            # and for named partitions one more batch each: a first pop teaches the server
            # the partition's id (before that it cannot send the pop to the partition's node);
            # for the queue one more batch: its first pop registers the group (`prime`)
            extra = s.scale_partitions if self.named else 1
            await prefill_queue(
                self.ctx, self.count_queue, (s.scale_count_requests + extra) * s.pop_batch,
                s.scale_partitions,
            )  # fmt: skip
            self.conns = await self.ctx.connect(s.scale_consumers)
            for p in range(extra if self.named else 0):  # on the connection that counts
                messages = await self._pop(self.conns[0], self.count_queue, f"p{p}")
                await ack_messages(self.conns[0], messages, None, now())

    async def prime(self) -> None:
        # a pop of the queue: the group's first pop of a queue registers it (its cursor rows
        # on every shard), once per queue and group, not the steady path counted after it
        if not self.named:
            messages = await self._pop(self.conns[0], self.count_queue)
            await ack_messages(self.conns[0], messages, None, now())

    async def _pop(
        self, conn: Connection, queue: str, partition: str | None = None
    ) -> list[dict[str, Any]]:
        path = self.ctx.pop_path(queue, batch=self.sizes.pop_batch, wait="false")
        if partition is not None:
            path = path.replace("?", f"/partition/{partition}?", 1)
        response = await conn.request_raw(conn.render("GET", path))
        if response.status == 204:
            return []
        return [m for m in expect(response, 200, "pop").json().get("messages") or [] if m]

    async def drive(self, seconds: float, limit: int | None = None) -> int:
        """Pop + ack until `seconds` have passed, the queue is drained or (`limit`) each
        consumer did that many; the pairs done."""
        end = now() + seconds
        parts = self.sizes.scale_partitions

        async def consumer(index: int, conn: Connection) -> int:
            own = [f"p{p}" for p in range(index, parts, len(self.conns))] if self.named else []
            done, turn, empty = 0, 0, 0
            while now() < end and (limit is None or done < limit):
                partition = own[turn % len(own)] if own else None
                turn += 1
                popped_at = now()
                messages = await self._pop(conn, self.queue, partition)
                if not messages:
                    empty += 1
                    if empty >= max(1, len(own)):
                        break  # drained: the window ends with the last consumer
                    continue
                empty = 0
                await ack_messages(conn, messages, None, popped_at)
                done += 1
            return done

        return sum(await asyncio.gather(*(consumer(i, c) for i, c in enumerate(self.conns))))

    async def warm(self, seconds: float) -> None:
        # a few pairs per consumer, not a time: the warm-up must not drain the queue
        await self.drive(seconds, limit=2)

    async def one(self, kind: str, i: int) -> None:
        if kind.startswith("pop"):
            partition = f"p{i % self.sizes.scale_partitions}" if self.named else None
            self.pending = await self._pop(self.conns[0], self.count_queue, partition)
            if not self.pending:
                raise BenchError(f"{self.side.name}: the queue ran dry in the round-trip window")
        else:
            await ack_messages(self.conns[0], self.pending, None, now())

    async def close(self) -> None:
        await close_all(self.conns)


SQL_TABLE = "bench_z_rows"
SQL_SETUP = [
    f"CREATE TABLE IF NOT EXISTS {SQL_TABLE} (k uuid NOT NULL, v bigint NOT NULL, pad text)",
    f"""
CREATE OR REPLACE FUNCTION bench_z_store(p_k uuid, p_v bigint, p_pad text) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {SQL_TABLE} (k, v, pad) VALUES (p_k, p_v, p_pad);
    RETURN p_v;
END;
$$""",
    f"""
CREATE OR REPLACE FUNCTION bench_z_store_many(p_k uuid, p_v bigint, p_items jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {SQL_TABLE} (k, v, pad)
    SELECT p_k, p_v + i.n, i.item ->> 'pad'
      FROM jsonb_array_elements(p_items) WITH ORDINALITY AS i (item, n);
    RETURN p_v;
END;
$$""",
]
# each in its own transaction (Citus refuses a function's distribution after a parallel
# operation on a distributed table in the same transaction)
SQL_DISTRIBUTE = [
    f"SELECT create_distributed_table('{SQL_TABLE}', 'k', colocate_with := 'queen.messages')"
    f" WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition"
    f" WHERE logicalrelid = '{SQL_TABLE}'::regclass)",
    "SELECT create_distributed_function('bench_z_store(uuid,bigint,text)', 'p_k',"
    f" colocate_with := '{SQL_TABLE}')",
    "SELECT create_distributed_function('bench_z_store_many(uuid,bigint,jsonb)', 'p_k',"
    f" colocate_with := '{SQL_TABLE}')",
]
SQL_STATEMENTS = {
    "sql_insert": f"INSERT INTO {SQL_TABLE} (k, v, pad) VALUES (%s, %s, %s)",
    "sql_call": "SELECT bench_z_store(%s, %s, %s)",
    "sql_call1000": "SELECT bench_z_store_many(%s, %s, %s)",
}


class SqlRunner(OpRunner):
    """The probe's statement from one connection, one at a time (autocommit), in a thread."""

    def __init__(self, ctx: Context, side: Side, op: str, run: int) -> None:
        super().__init__(ctx, side, op, run)
        self.keys = [str(uuid.uuid4()) for _ in range(self.sizes.scale_partitions)]
        self.conn: Any = None
        # the third argument: a message's payload pad, or (sql_call1000) a push body's
        # items, as many as a batched push carries
        self.arg = ctx.pad
        if op == "sql_call1000":
            items = [{"seq": i, "pad": ctx.pad} for i in range(self.sizes.push_batch)]
            self.arg = orjson.dumps(items).decode()

    def _setup(self) -> None:
        self.conn = psycopg2.connect(self.side.dsn)
        self.conn.autocommit = True
        with self.conn.cursor() as cur:
            for statement in SQL_SETUP + (SQL_DISTRIBUTE if self.side.name == "citus" else []):
                cur.execute(statement)

    async def setup(self) -> None:
        await asyncio.to_thread(self._setup)

    def _loop(self, seconds: float | None, count: int = 1) -> int:
        sql, pad = SQL_STATEMENTS[self.op], self.arg
        keys, n = self.keys, 0
        end = now() + seconds if seconds is not None else None
        with self.conn.cursor() as cur:
            while (now() < end) if end is not None else (n < count):
                cur.execute(sql, (keys[n % len(keys)], n, pad))
                n += 1
        return n

    async def drive(self, seconds: float) -> int:
        return await asyncio.to_thread(self._loop, seconds)

    async def one(self, kind: str, i: int) -> None:
        await asyncio.to_thread(self._loop, None, 1)

    async def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


RUNNERS: dict[str, Callable[[Context, Side, str, int], OpRunner]] = {
    "push1": PushRunner,
    "push1000": PushRunner,
    "popack100": PopAckRunner,
    "popack100p": PopAckRunner,
    "sql_insert": SqlRunner,
    "sql_call": SqlRunner,
    "sql_call1000": SqlRunner,
}


async def measure_side(
    ctx: Context, pair: ScalePair, side: Side, op: str, run: int
) -> dict[str, Any]:
    """CPU per op of each node over a driven window; on the cluster, round trips too."""
    if op in HTTP_OPS and side.target is None:
        raise BenchError(f"the {side.name} server did not start: {side.error}")
    runner = RUNNERS[op](ctx, side, op, run)
    out: dict[str, Any] = {}
    try:
        await runner.setup()
        await runner.warm(ctx.sizes.warmup_s)
        roots: dict[str, int | None] = dict(side.nodes)
        roots["server"] = side.target.server_pid if side.target else None
        window = procstat.CpuWindow(roots).start()
        ops = await runner.drive(ctx.sizes.duration_s)
        cpu = window.stop()
        if ops == 0:
            raise BenchError(f"{side.name} {op}: no operation completed in the window")
        seconds = cpu.get("seconds") or 0.0
        out |= {"ops": ops, "seconds": seconds, "cpu": cpu,
                "rate": round(ops / seconds, 1) if seconds else None,
                "ms_per_op": node_ms(cpu, [*side.nodes, "server"], ops)}  # fmt: skip
        if side.name == "citus":
            out["remote"] = await round_trips(ctx, pair, runner, op)
    finally:
        await runner.close()
    return out


async def round_trips(
    ctx: Context, pair: ScalePair, runner: OpRunner, op: str
) -> dict[str, dict[str, Any]]:
    """Requests sent one at a time with `citus.log_remote_commands` on: the commands each
    node sent to each node, per request."""
    await runner.prime()
    await asyncio.to_thread(pair.set_remote_logging, True)
    reps = ctx.sizes.scale_count_requests
    totals: dict[str, dict[str, Counter[str]]] = {}
    shapes: dict[str, Counter[str]] = {}
    try:
        for i in range(reps):
            for kind in REQUEST_KINDS[op]:
                marks = pair.log_marks()
                await runner.one(kind, i)
                sent, seen = pair.remote_since(marks)
                per = totals.setdefault(kind, {})
                for sender, counter in sent.items():
                    per.setdefault(sender, Counter()).update(counter)
                shapes.setdefault(kind, Counter()).update(seen)
    finally:
        await asyncio.to_thread(pair.set_remote_logging, False)
    out: dict[str, dict[str, Any]] = {}
    for kind, per in totals.items():
        by_sender = {s: {d: round(n / reps, 2) for d, n in c.items()} for s, c in per.items()}
        out[kind] = {
            "requests": reps,
            "coordinator": round(sum(per.get("coordinator", Counter()).values()) / reps, 2),
            "all_nodes": round(sum(sum(c.values()) for c in per.values()) / reps, 2),
            "by_sender": by_sender,
            # what the round trips are: the most frequent commands, per request
            "commands": {c: round(n / reps, 2) for c, n in shapes[kind].most_common(15)},
        }
    return out


def pair_of(ctx: Context) -> ScalePair:
    """The cluster, the plain PostgreSQL and their servers: started by the first run, kept for
    the next ones, stopped when the bench ends."""
    pair = ctx.resources.get(PAIR_KEY)
    if pair is None:
        log("(z) starting a Citus cluster (coordinator + 2 workers) and a plain PostgreSQL 15")
        pair = ScalePair(ctx.options)
        ctx.closers.append(pair.stop)
        pair.start()
        ctx.resources[PAIR_KEY] = pair
        for side in (pair.plain, pair.citus):
            if side is not None and side.error:
                log(f"(z) the {side.name} server did not start: {side.error[:300]}")
    assert isinstance(pair, ScalePair)
    return pair


def figures_of(
    op: str,
    plain: dict[str, Any],
    citus: dict[str, Any] | None,
    idle: dict[str, dict[str, float | None]],
) -> dict[str, float]:
    figures: dict[str, float] = {}
    plain_ms = plain["ms_per_op"].get("postgres")
    if plain_ms is not None:
        figures[f"{op}_plain_ms"] = plain_ms
    figures[f"{op}_plain_rate"] = plain["rate"]
    if citus is None:
        return figures
    ms = citus["ms_per_op"]
    coord = ms.get("coordinator")
    if coord is not None:
        figures[f"{op}_coord_ms"] = coord
        if plain_ms:
            figures[f"{op}_coord_pct"] = round(coord / plain_ms * 100, 1)
        plain_net = net_ms(plain, idle.get("plain", {}), "postgres")
        coord_net = net_ms(citus, idle.get("citus", {}), "coordinator")
        if plain_net and coord_net is not None:
            figures[f"{op}_coord_net_pct"] = round(coord_net / plain_net * 100, 1)
    workers = [v for k, v in ms.items() if k.startswith("worker") and v is not None]
    if workers:
        figures[f"{op}_workers_ms"] = round(sum(workers), 4)
    figures[f"{op}_citus_rate"] = citus["rate"]
    for kind, counted in (citus.get("remote") or {}).items():
        figures[f"{kind}_remote"] = counted["coordinator"]
    return figures


async def citus_scale(ctx: Context, run: int) -> RunResult:
    pair = pair_of(ctx)
    assert pair.plain is not None and pair.citus is not None
    sides = [pair.plain, pair.citus] if run % 2 == 0 else [pair.citus, pair.plain]
    result = RunResult()
    errors: dict[str, str] = {}
    idle = {side.name: await idle_cpu(side) for side in sides}
    result.extra["idle"] = idle
    for op in ctx.sizes.scale_ops or OPS:
        measured: dict[str, dict[str, Any]] = {}
        for side in sides:
            try:
                measured[side.name] = await measure_side(ctx, pair, side, op, run)
            except (BenchError, HttpError, psycopg2.Error, OSError) as exc:
                if side.name == "plain":
                    raise
                errors[op] = f"{type(exc).__name__}: {str(exc)[:500]}"
                log(f"(z) {op} on Citus: not measured: {errors[op]}")
        result.figures |= figures_of(op, measured["plain"], measured.get("citus"), idle)
        result.extra[op] = measured
        log(f"(z) run {run + 1}: {op}: " + summary(op, result.figures))
    result.extra["errors"] = errors
    result.extra["nodes"] = {"citus": pair.citus.nodes, "plain": pair.plain.nodes}
    return result


def summary(op: str, figures: dict[str, float]) -> str:
    def fmt(key: str, unit: str = "") -> str:
        value = figures.get(key)
        return "-" if value is None else f"{value:g}{unit}"

    remote = ", ".join(f"{kind} {fmt(f'{kind}_remote')} round trips" for kind in REQUEST_KINDS[op])
    return (
        f"plain {fmt(f'{op}_plain_ms', ' ms')}/op, coordinator {fmt(f'{op}_coord_ms', ' ms')}/op "
        f"({fmt(f'{op}_coord_pct', '%')}; net of idle {fmt(f'{op}_coord_net_pct', '%')}), "
        f"workers {fmt(f'{op}_workers_ms', ' ms')}/op; "
        f"{remote}; {fmt(f'{op}_plain_rate')} vs {fmt(f'{op}_citus_rate')} op/s"
    )
