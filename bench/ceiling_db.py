"""Database ceilings: what raw psycopg2 does against the same PostgreSQL, in threads.

The same rows as the scenarios, written or consumed with the least SQL possible, in a
scratch schema of their own (dropped afterwards): the server cannot be faster than this.
psycopg2 releases the GIL while it waits for PostgreSQL, so one thread per connection is
enough to keep every connection busy. Every SQL statement of the ceilings is here.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg2

TABLES = """
CREATE SCHEMA {s};
-- shaped like queen.messages (schema/migrations/0002_queue_core.sql), without the
-- columns a push leaves NULL
CREATE TABLE {s}.messages (
    id             BIGINT GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    transaction_id TEXT NOT NULL,
    partition_id   UUID NOT NULL,
    payload        JSONB NOT NULL DEFAULT 'null'::jsonb,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT messages_partition_transaction_unique UNIQUE (partition_id, transaction_id)
);
CREATE INDEX messages_partition_order_idx ON {s}.messages (partition_id, created_at, id);
-- the SKIP LOCKED queue: the same rows plus a state (0 ready, 1 leased, 2 done)
CREATE TABLE {s}.jobs (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    transaction_id TEXT NOT NULL,
    partition_id   UUID NOT NULL,
    payload        JSONB NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    state          SMALLINT NOT NULL DEFAULT 0,
    lease_id       UUID
);
CREATE INDEX jobs_ready_idx ON {s}.jobs (id) WHERE state = 0;
-- shaped like queen.kv (schema/migrations/0012_kv.sql): the (m) upsert ceiling
CREATE SEQUENCE {s}.kv_version_seq CACHE 1;
CREATE TABLE {s}.kv (
    namespace  TEXT COLLATE "C" NOT NULL,
    key        TEXT COLLATE "C" NOT NULL,
    value      JSONB NOT NULL,
    version    BIGINT NOT NULL,
    expires_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, key)
);
CREATE INDEX kv_expires_idx ON {s}.kv (expires_at) WHERE expires_at IS NOT NULL;
"""
INSERT_BATCH = """
INSERT INTO {s}.messages (transaction_id, partition_id, payload)
SELECT e ->> 'transactionId', %s, e -> 'payload' FROM jsonb_array_elements(%s::jsonb) e
"""
INSERT_ONE = "INSERT INTO {s}.messages (transaction_id, partition_id, payload) VALUES (%s, %s, %s)"
PREFILL_JOBS = """
INSERT INTO {s}.jobs (transaction_id, partition_id, payload)
SELECT 'tx-' || g, md5('p' || mod(g, %s))::uuid, jsonb_build_object('seq', g, 'pad', %s::text)
  FROM generate_series(1, %s) g
"""
LEASE = """
UPDATE {s}.jobs SET state = 1, lease_id = %s
 WHERE id IN (SELECT id FROM {s}.jobs WHERE state = 0 ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)
RETURNING id, transaction_id, partition_id, payload
"""
FINISH = "UPDATE {s}.jobs SET state = 2 WHERE id = ANY(%s)"
UPSERT_KV = """
INSERT INTO {s}.kv (namespace, key, value, version, expires_at)
VALUES ('bench', %s, %s::jsonb, nextval('{s}.kv_version_seq'), now() + interval '60 s')
ON CONFLICT (namespace, key) DO UPDATE
   SET value = EXCLUDED.value, version = EXCLUDED.version,
       expires_at = EXCLUDED.expires_at, updated_at = now()
"""

# One thread's work: called with its connection and loop index, returns rows done.
Step = Callable[[Any, int], int]


@dataclass
class Tally:
    rows: int = 0
    last: float = 0.0
    drained: bool = False
    error: str | None = None


class Scratch:
    """The scratch schema on the target's database: created, used, dropped."""

    def __init__(self, dsn: str, name: str) -> None:
        self.dsn = dsn
        self.name = name

    def sql(self, template: str) -> str:
        return template.format(s=self.name)

    def connect(self) -> Any:
        conn = psycopg2.connect(self.dsn, application_name="bench-ceiling")
        conn.autocommit = True
        return conn

    def create(self) -> None:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"DROP SCHEMA IF EXISTS {self.name} CASCADE")
            cur.execute(self.sql(TABLES))

    def drop(self) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"DROP SCHEMA IF EXISTS {self.name} CASCADE")
        finally:
            conn.close()

    def prefill_jobs(self, rows: int, partitions: int, pad: str) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(self.sql(PREFILL_JOBS), (partitions, pad, rows))
                cur.execute(f"VACUUM ANALYZE {self.name}.jobs")
        finally:
            conn.close()

    # workloads: one Step per connection -------------------------------------------------
    def insert_batches(self, partition: str, bodies: Callable[[int], bytes]) -> Step:
        """`INSERT ... SELECT FROM jsonb_array_elements`, one batch per commit."""
        sql = self.sql(INSERT_BATCH)

        def step(conn: Any, thread: int) -> int:
            body = bodies(thread)
            with conn.cursor() as cur:
                cur.execute(sql, (partition, body.decode()))
                return int(cur.rowcount)

        return step

    def insert_rows(self, partition: str, rows: Callable[[int], tuple[str, bytes]]) -> Step:
        """One row per commit."""
        sql = self.sql(INSERT_ONE)

        def step(conn: Any, thread: int) -> int:
            txid, payload = rows(thread)
            with conn.cursor() as cur:
                cur.execute(sql, (txid, partition, payload.decode()))
            return 1

        return step

    def upsert_keys(self, keys: int, value: bytes) -> Step:
        """One key/value upsert per commit, over `keys` keys per thread (scenario (m))."""
        sql = self.sql(UPSERT_KV)
        counters: dict[int, int] = {}

        def step(conn: Any, thread: int) -> int:
            n = counters[thread] = counters.get(thread, 0) + 1
            with conn.cursor() as cur:
                cur.execute(sql, (f"t{thread}:{n % keys}", value.decode()))
            return 1

        return step

    def lease_and_finish(self, batch: int) -> Step:
        """One transaction leases `batch` ready rows (SKIP LOCKED), a second marks them done."""
        lease, finish = self.sql(LEASE), self.sql(FINISH)

        def step(conn: Any, thread: int) -> int:
            with conn.cursor() as cur:
                cur.execute(lease, (str(uuid.uuid4()), batch))
                ids = [row[0] for row in cur.fetchall()]
                if ids:
                    cur.execute(finish, (ids,))
            return len(ids)

        return step


def run_threads(scratch: Scratch, step: Step, connections: int, seconds: float) -> dict[str, Any]:
    """`connections` threads repeat `step` for `seconds` (or until a step does no row)."""
    tallies = [Tally() for _ in range(connections)]
    conns = [scratch.connect() for _ in range(connections)]
    gate = threading.Barrier(connections + 1)
    start: list[float] = []

    def work(index: int) -> None:
        tally, conn = tallies[index], conns[index]
        gate.wait()
        end = start[0] + seconds
        try:
            while time.perf_counter() < end:
                done = step(conn, index)
                if not done:
                    tally.drained = True
                    break
                tally.rows += done
                tally.last = time.perf_counter()
        except psycopg2.Error as exc:
            tally.error = f"{type(exc).__name__}: {exc}".strip()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(connections)]
    for t in threads:
        t.start()
    start.append(time.perf_counter())
    gate.wait()
    for t in threads:
        t.join()
    for conn in conns:
        conn.close()
    errors = [t.error for t in tallies if t.error]
    if errors:
        raise RuntimeError(errors[0])
    rows = sum(t.rows for t in tallies)
    elapsed = max((t.last for t in tallies), default=start[0]) - start[0]
    return {
        "rows": rows,
        "seconds": round(elapsed, 3),
        "per_s": rows / elapsed if elapsed > 0 else 0.0,
        "drained": any(t.drained for t in tallies),
    }
