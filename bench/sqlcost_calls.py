"""(q)'s calls: one side's connection, each call measured on its own (the backend's CPU from
/proc, the client's wall clock, and in the counting calls the statements
pg_stat_statements saw), and the workload of a round: pushes, then pops each followed by
the ack of what it delivered, as queue/store.py makes them."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
import psycopg2

from bench.options import Sizes
from bench.sqlcost_db import Side

KINDS = ("push_partition", "push_messages", "pop_batch", "ack_partition", "pop_partition",
         "ack_messages")  # fmt: skip
QUEUE = "sqlcost"
FILLER = "sqlcost-filler"
PARTITIONS = 8
BATCH = 10
GROUP = "__QUEUE_MODE__"


def backend_cpu_ns(pid: int) -> int:
    """CPU time of a process so far, in ns (/proc/<pid>/schedstat; else /proc/<pid>/stat's
    clock ticks)."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        import os

        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


@dataclass
class Samples:
    cpu_ns: list[int] = field(default_factory=list)
    wall_ns: list[int] = field(default_factory=list)
    statements: list[int] = field(default_factory=list)
    texts: list[list[Any]] = field(default_factory=list)  # the last counted call's


class Caller:
    """One connection to a side's database; calls its named statements."""

    def __init__(self, side: Side, counting: bool) -> None:
        self.side = side
        self.counting = counting
        self.conn = psycopg2.connect(side.dsn, connect_timeout=10)
        self.conn.autocommit = True
        self.cur = self.conn.cursor()
        self.cur.execute("SELECT pg_backend_pid(), (SELECT oid FROM pg_database "
                         "WHERE datname = current_database())")  # fmt: skip
        row = self.cur.fetchone()
        assert row is not None
        self.pid, self.dboid = int(row[0]), int(row[1])
        self.samples: dict[str, Samples] = {k: Samples() for k in KINDS}
        self.count_next = False
        self.measuring = True

    def close(self) -> None:
        self.conn.close()

    def run(self, name: str, args: tuple[Any, ...]) -> Any:
        """A named statement, unmeasured: its first row."""
        self.cur.execute(self.side.statements[name], args)
        return self.cur.fetchone()

    def call(self, kind: str, name: str, args: tuple[Any, ...]) -> Any:
        """A measured call: its first row."""
        if self.count_next:
            return self._counted(kind, name, args)
        if not self.measuring:
            return self.run(name, args)
        statement = self.side.statements[name]
        cpu0, wall0 = backend_cpu_ns(self.pid), time.perf_counter_ns()
        self.cur.execute(statement, args)
        row = self.cur.fetchone()
        wall1, cpu1 = time.perf_counter_ns(), backend_cpu_ns(self.pid)
        s = self.samples[kind]
        s.cpu_ns.append(cpu1 - cpu0)
        s.wall_ns.append(wall1 - wall0)
        return row

    def _counted(self, kind: str, name: str, args: tuple[Any, ...]) -> Any:
        self.cur.execute("SELECT pg_stat_statements_reset()")
        self.cur.execute("SET pg_stat_statements.track = 'all'")
        self.cur.execute(self.side.statements[name], args)
        row = self.cur.fetchone()
        self.cur.execute("SET pg_stat_statements.track = 'none'")
        self.cur.execute(
            "SELECT calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 120) "
            "FROM pg_stat_statements WHERE dbid = %s AND query !~* '^\\s*set pg_stat_statements'"
            " ORDER BY calls DESC, query",
            (self.dboid,),
        )
        texts = [list(r) for r in self.cur.fetchall()]
        s = self.samples[kind]
        s.statements.append(sum(int(r[0]) for r in texts))
        s.texts = texts
        return row


def mean_ms(values: list[int]) -> float | None:
    return round(sum(values) / len(values) / 1e6, 4) if values else None


class Workload:
    """A side's queue of 8 partitions and the calls of a round on it."""

    def __init__(self, caller: Caller, sizes: Sizes) -> None:
        self.c = caller
        self.sizes = sizes
        self.pids: list[str] = []
        self.seq = 0

    def item(self, partition: str, queue: str = QUEUE) -> dict[str, Any]:
        self.seq += 1
        return {"queue": queue, "partition": partition,
                "payload": {"seq": self.seq, "pad": "x" * 40},
                "transactionId": str(uuid.uuid4())}  # fmt: skip

    def push_general(self, items: list[dict[str, Any]]) -> list[Any]:
        row = self.c.run("push_messages", (orjson.dumps(items).decode(),))
        return list(orjson.loads(row[0]))

    def setup(self, warmup: int = 48) -> None:
        """The queue and its partitions, then `warmup` untimed calls of each kind (the
        group's registration, the statements' first plans)."""
        rows = self.push_general([self.item(f"p{i}") for i in range(PARTITIONS)])
        self.pids = [r[2] for r in rows]
        # A backlog in every partition, so that each pop finds a full batch wherever the
        # queue's pops went before (they take the partition that waited longest).
        pops = (self.sizes.sqlcost_calls + self.sizes.sqlcost_count_calls) // 4 + 1
        backlog = BATCH * (2 * (pops // PARTITIONS + 1) + 2) * (2 * self.sizes.sqlcost_rounds + 1)
        for k in range(PARTITIONS):
            self.push_general([self.item(f"p{k}") for _ in range(backlog)])
        self.c.measuring = False
        try:
            self.calls(warmup)
        finally:
            self.c.measuring = True

    def fill(self, partitions: int) -> None:
        """`partitions` more partitions of another queue, one message each, with the rows a
        push leaves (the partition's counters and newest message; no cursor rows: no
        group is registered for that queue), written set-wise by plain SQL with the
        triggers off: a push creating partitions costs about 4 ms per partition here, most
        of it the commit-time bookkeeping of each new one."""
        sql = (
            "INSERT INTO queen.queues (name, namespace, task) VALUES (%(q)s, %(q)s, '')"
            " ON CONFLICT (name) DO NOTHING;"
            "SET LOCAL session_replication_role = replica;"
            "WITH q AS (SELECT id FROM queen.queues WHERE name = %(q)s),"
            " p AS (INSERT INTO queen.partitions (queue_id, name)"
            "       SELECT q.id, 'f' || gen_random_uuid() FROM q, generate_series(1, %(n)s)"
            "       RETURNING id, queue_id),"
            " m AS (INSERT INTO queen.messages (transaction_id, partition_id, payload,"
            "                                   partition_offset)"
            "       SELECT gen_random_uuid()::text, p.id, '{\"filler\": true}', 0 FROM p"
            "       RETURNING id, partition_id, created_at),"
            " c AS (INSERT INTO queen.partition_counters (partition_id, next_offset)"
            "       SELECT p.id, 1 FROM p)"
            " INSERT INTO queen.partition_lookup (partition_id, queue_id, last_message_id,"
            "                                     last_message_created_at)"
            " SELECT m.partition_id, p.queue_id, m.id, m.created_at"
            "   FROM m JOIN p ON p.id = m.partition_id;"
        )
        self.c.conn.autocommit = False
        try:
            self.c.cur.execute(sql, {"q": FILLER, "n": partitions})
            self.c.conn.commit()
        finally:
            self.c.conn.autocommit = True
        self.c.cur.execute("ANALYZE")

    def round(self) -> None:
        """Timed calls, then counted ones (when counting), of every kind."""
        self.calls(self.sizes.sqlcost_calls)
        if self.c.counting:
            self.c.count_next = True
            try:
                self.calls(self.sizes.sqlcost_count_calls)
            finally:
                self.c.count_next = False

    def calls(self, pushes: int) -> None:
        for _ in range(pushes):
            k = self.seq % PARTITIONS
            body = orjson.dumps([self.item(f"p{k}")]).decode()
            row = self.c.call("push_partition", "push_partition", (self.pids[k], body))
            if row[-1] is None:
                raise RuntimeError("(q) push_partition declined a push of a known partition")
        for _ in range(pushes):
            items = [self.item(f"p{self.seq % PARTITIONS}")]
            self.c.call("push_messages", "push_messages", (orjson.dumps(items).decode(),))
        pops = pushes // 4 + 1
        for _ in range(pops):  # the queue's pops, each acked by its partition's entry
            answer = self.c.call(
                "pop_batch", "pop_batch", (orjson.dumps([self.request()]).decode(),)
            )
            got = orjson.loads(answer[0])[0]
            self.ack("ack_partition", got)
        for i in range(pops):  # a named partition's, each acked by the general entry
            k = i % PARTITIONS
            request = {**self.request(), "partition": f"p{k}"}
            answer = self.c.call("pop_partition", "pop_partition",
                                 (self.pids[k], orjson.dumps(request).decode()))  # fmt: skip
            self.ack("ack_messages", orjson.loads(answer[0]))

    @staticmethod
    def request() -> dict[str, Any]:
        return {"idx": 0, "queue": QUEUE, "partition": None, "consumerGroup": GROUP,
                "batch": BATCH, "partitions": 1, "leaseId": str(uuid.uuid4()),
                "autoAck": False, "stopOnEmpty": False}  # fmt: skip

    def ack(self, kind: str, popped: dict[str, Any]) -> None:
        messages = popped.get("messages") or []
        if not messages:
            raise RuntimeError(f"(q) a pop delivered nothing: {str(popped)[:300]}")
        acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                 "leaseId": m["leaseId"], "status": "completed", "consumerGroup": GROUP}
                for m in messages]  # fmt: skip
        body = orjson.dumps({"acks": acks}).decode()
        if kind == "ack_partition":
            self.c.call(kind, "ack_partition", (popped["partitionId"], body))
        else:
            self.c.call(kind, "ack_messages", (body,))

    def take(self, kind: str) -> dict[str, Any]:
        """Per call: CPU and wall (mean ms), statements (mean); then forget them."""
        s = self.c.samples[kind]
        self.c.samples[kind] = Samples()
        stmts = round(sum(s.statements) / len(s.statements), 2) if s.statements else None
        return {"cpu": mean_ms(s.cpu_ns), "wall": mean_ms(s.wall_ns), "stmts": stmts,
                "texts": s.texts}  # fmt: skip
