"""Retention, completed retention, max-wait eviction and idle-partition cleanup, run
directly against a real PostgreSQL with small batch sizes (the services' own code paths).

Messages are made "old" by shifting every timestamp of a queue back together (messages,
the wildcard index and the cursors), so the (created_at, id) order the cursors rely on
is unchanged.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

from queen_threads.background.exclusive import ExclusiveService, Session, lock_key, session
from queen_threads.background.retention import (
    EvictionJob,
    RetentionJob,
    cleanup_messages,
    cleanup_partitions,
)
from queen_threads.db import Database
from queen_threads.queue.store import QueueStore
from queen_threads.runtime import Runtime
from tests.support.exclusive import race_run_once

QM = "__QUEUE_MODE__"


class World:
    """Produce and inspect queue state through the real stored functions."""

    def __init__(self, database: Database, conn: psycopg2.extensions.connection) -> None:
        self.store = QueueStore(database)
        self.conn = conn

    def sql(self, text: str, params: Any = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(text, params)
            return cur.fetchall() if cur.description else []

    def one(self, text: str, params: Any = None) -> Any:
        return self.sql(text, params)[0][0]

    def configure(self, queue: str, **options: Any) -> None:
        self.store.configure({"queue": queue, "options": options})

    def push(self, queue: str, n: int, partition: str = "Default", tag: str = "m") -> list[str]:
        tids = [f"{tag}-{i}-{uuid.uuid4().hex[:6]}" for i in range(n)]
        items = [
            {"queue": queue, "partition": partition, "payload": {"i": i}, "transactionId": t}
            for i, t in enumerate(tids)
        ]
        results = self.store.push(items)
        assert all(r["status"] == "queued" for r in results), results
        return tids

    def pop(
        self, queue: str, batch: int, group: str | None = None, partition: str | None = None
    ) -> dict[str, Any]:
        return self.store.pop([{
            "idx": 0, "queue": queue, "partition": partition, "consumerGroup": group,
            "batch": batch, "leaseId": str(uuid.uuid4()), "autoAck": False,
        }])[0]  # fmt: skip

    def consume(self, queue: str, n: int, group: str | None = None, partition: str | None = None,
                status: str = "completed") -> list[str]:  # fmt: skip
        """Pop n messages and ack them all (status for every ack)."""
        res = self.pop(queue, n, group, partition)
        msgs = res["messages"]
        assert len(msgs) == n, res
        acks = [{
            "transactionId": m["transactionId"], "partitionId": m["partitionId"],
            "status": status, "leaseId": m["leaseId"], "consumerGroup": group or QM,
            "error": "boom" if status != "completed" else None,
        } for m in msgs]  # fmt: skip
        results = self.store.ack(acks)
        assert all(r["success"] for r in results), results
        return [m["transactionId"] for m in msgs]

    def age(self, queue: str, seconds: int) -> None:
        """Shift every timestamp of the queue `seconds` into the past."""
        shift = f"{int(seconds)} seconds"
        self.sql(
            """
            UPDATE queen.messages m SET created_at = m.created_at - %(s)s::interval
              FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
             WHERE m.partition_id = p.id AND q.name = %(q)s;
            UPDATE queen.partition_lookup pl
               SET last_message_created_at = pl.last_message_created_at - %(s)s::interval
              FROM queen.queues q WHERE q.id = pl.queue_id AND q.name = %(q)s;
            UPDATE queen.partition_consumers pc
               SET last_consumed_created_at = pc.last_consumed_created_at - %(s)s::interval
              FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
             WHERE pc.partition_id = p.id AND q.name = %(q)s;
            """,
            {"s": shift, "q": queue},
        )

    def tids(self, queue: str, partition: str = "Default") -> list[str]:
        rows = self.sql(
            """SELECT m.transaction_id FROM queen.messages m
                 JOIN queen.partitions p ON p.id = m.partition_id
                 JOIN queen.queues q ON q.id = p.queue_id
                WHERE q.name = %s AND p.name = %s ORDER BY m.created_at, m.id""",
            (queue, partition),
        )
        return [r[0] for r in rows]

    def history(self, queue: str, kind: str) -> list[int]:
        rows = self.sql(
            """SELECT messages_deleted FROM queen.retention_history
                WHERE queue_name = %s AND retention_type = %s ORDER BY id""",
            (queue, kind),
        )
        return [r[0] for r in rows]

    def lookup(self, queue: str, partition: str = "Default") -> tuple[Any, ...] | None:
        rows = self.sql(
            """SELECT pl.last_message_id, m.transaction_id FROM queen.partition_lookup pl
                 JOIN queen.partitions p ON p.id = pl.partition_id
                 JOIN queen.queues q ON q.id = p.queue_id
                 LEFT JOIN queen.messages m ON m.id = pl.last_message_id
                WHERE q.name = %s AND p.name = %s""",
            (queue, partition),
        )
        return rows[0] if rows else None


@pytest.fixture
def world(database: Database, pg_conn: psycopg2.extensions.connection) -> World:
    return World(database, pg_conn)


@pytest.fixture
def ses(migrated_dsn: str) -> Iterator[Session]:
    with session(migrated_dsn, 30000, 5000) as s:
        yield s


def qname() -> str:
    return f"ret-{uuid.uuid4().hex[:8]}"


# -- retentionSeconds -----------------------------------------------------------------
def test_retention_deletes_old_messages_of_enabled_queues_in_bounded_batches(
    world: World, ses: Session
) -> None:
    on, off, plain = qname(), qname(), qname()
    world.configure(on, retentionEnabled=True, retentionSeconds=3600)
    world.configure(off, retentionEnabled=False, retentionSeconds=3600)
    world.configure(plain)
    world.push(on, 25, tag="old")
    world.push(off, 10)
    world.push(plain, 10)
    for q in (on, off, plain):
        world.age(on if q == on else q, 7200)
    fresh = world.push(on, 5, tag="fresh")
    world.push(on, 4, partition="other", tag="young")  # not old: kept

    totals = cleanup_messages(ses, "retention", batch_size=7)

    assert totals.deleted == 25
    assert world.history(on, "retention") == [7, 7, 7, 4]  # one row per batch, each <= 7
    assert world.tids(on) == fresh
    assert len(world.tids(on, "other")) == 4
    assert len(world.tids(off)) == 10
    assert len(world.tids(plain)) == 10
    # Nothing left to do: a second run deletes nothing and records nothing.
    assert cleanup_messages(ses, "retention", batch_size=7).deleted == 0
    assert len(world.history(on, "retention")) == 4


def test_retention_keeps_messages_under_a_live_lease(world: World, ses: Session) -> None:
    q = qname()
    world.configure(q, retentionEnabled=True, retentionSeconds=60)
    world.push(q, 6)
    leased = world.pop(q, 2)  # the first two are delivered under a live lease
    world.age(q, 3600)

    assert cleanup_messages(ses, "retention", batch_size=100).deleted == 4
    remaining = world.tids(q)
    assert remaining == [m["transactionId"] for m in leased["messages"]]

    # Once acked (lease released) they go in the next cycle.
    acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
             "status": "completed", "leaseId": m["leaseId"], "consumerGroup": QM}
            for m in leased["messages"]]  # fmt: skip
    assert all(r["success"] for r in world.store.ack(acks))
    assert cleanup_messages(ses, "retention", batch_size=100).deleted == 2
    assert world.tids(q) == []


def test_retention_also_removes_dead_lettered_messages_and_their_dlq_rows(
    world: World, ses: Session
) -> None:
    q = qname()
    world.configure(q, retentionEnabled=True, retentionSeconds=60)
    world.push(q, 3)
    world.consume(q, 1, status="dlq")
    world.age(q, 3600)
    assert cleanup_messages(ses, "retention", batch_size=10).deleted == 3
    dlq = world.one(
        """SELECT count(*) FROM queen.dead_letter_queue d
             JOIN queen.partitions p ON p.id = d.partition_id
             JOIN queen.queues qq ON qq.id = p.queue_id WHERE qq.name = %s""",
        (q,),
    )
    assert dlq == 0


# -- completedRetentionSeconds ----------------------------------------------------------
def test_completed_retention_needs_every_group_reading_the_partition(
    world: World, ses: Session
) -> None:
    q = qname()
    world.configure(q, retentionEnabled=True, completedRetentionSeconds=60)
    tids = world.push(q, 10)
    world.consume(q, 6)  # queue mode: 6 consumed
    world.consume(q, 3, group="analytics")  # a named group: 3 consumed
    world.age(q, 3600)
    world.push(q, 2, tag="fresh")  # young: never touched

    totals = cleanup_messages(ses, "completed_retention", batch_size=2)

    assert totals.deleted == 3  # consumed by both groups
    assert world.history(q, "completed_retention") == [2, 1]
    assert world.tids(q)[:7] == tids[3:]
    assert len(world.tids(q)) == 9
    # The slower group catches up: now the queue-mode prefix is completed everywhere.
    world.consume(q, 5, group="analytics")
    assert cleanup_messages(ses, "completed_retention", batch_size=2).deleted == 3
    assert world.tids(q)[:4] == tids[6:]


def test_completed_retention_counts_subscribed_groups_that_have_not_visited_a_partition(
    world: World, ses: Session
) -> None:
    q = qname()
    world.configure(q, retentionEnabled=True, completedRetentionSeconds=60)
    world.push(q, 2, partition="a")
    world.push(q, 4, partition="b")
    # 'audit' subscribes to the whole queue (wildcard pop) and has read partition a only.
    got = world.consume(q, 2, group="audit")
    assert set(got) == set(world.tids(q, "a"))
    world.consume(q, 2, partition="a")
    world.consume(q, 4, partition="b")  # queue mode consumed b completely
    world.age(q, 3600)

    assert cleanup_messages(ses, "completed_retention", batch_size=10).deleted == 2
    assert world.tids(q, "a") == []
    assert len(world.tids(q, "b")) == 4  # audit will read b from its beginning: kept


def test_completed_retention_keeps_unread_partitions_dead_letters_and_disabled_queues(
    world: World, ses: Session
) -> None:
    q, unread, disabled = qname(), qname(), qname()
    world.configure(q, retentionEnabled=True, completedRetentionSeconds=60, retryLimit=0)
    world.configure(unread, retentionEnabled=True, completedRetentionSeconds=60)
    world.configure(disabled, retentionEnabled=False, completedRetentionSeconds=60)
    world.push(q, 4)
    dead = world.consume(q, 1, status="dlq")
    world.consume(q, 3)
    world.push(unread, 3)  # nobody consumes: nothing is completed
    world.push(disabled, 3)
    world.consume(disabled, 3)
    for name in (q, unread, disabled):
        world.age(name, 3600)

    assert cleanup_messages(ses, "completed_retention", batch_size=10).deleted == 3
    assert world.tids(q) == dead  # dead-lettered: kept for inspection
    assert len(world.tids(unread)) == 3
    assert len(world.tids(disabled)) == 3


# -- maxWaitTimeSeconds -------------------------------------------------------------------
def test_eviction_deletes_old_messages_queue_mode_has_not_consumed(
    world: World, ses: Session
) -> None:
    q, other = qname(), qname()
    world.configure(q, maxWaitTimeSeconds=60)
    world.configure(other)
    tids = world.push(q, 10)
    world.consume(q, 3)  # consumed: not eviction's business
    world.push(other, 5)
    world.age(q, 3600)
    world.age(other, 3600)
    fresh = world.push(q, 2, tag="fresh")

    totals = cleanup_messages(ses, "max_wait_time_eviction", batch_size=3)

    assert totals.deleted == 7
    assert world.history(q, "max_wait_time_eviction") == [3, 3, 1]
    assert world.tids(q) == tids[:3] + fresh
    assert len(world.tids(other)) == 5
    # The queue-mode consumer gets the fresh messages next.
    got = world.pop(q, 10)
    assert [m["transactionId"] for m in got["messages"]] == fresh


def test_eviction_spares_leased_and_dead_lettered_messages(world: World, ses: Session) -> None:
    q = qname()
    world.configure(q, maxWaitTimeSeconds=60)
    world.push(q, 2, tag="a")
    dead = world.consume(q, 1, group="side", status="dlq")  # a named group dead-lettered #0
    leased = world.pop(q, 2)  # queue mode holds both under a live lease
    world.push(q, 3, tag="b")
    world.age(q, 3600)

    assert cleanup_messages(ses, "max_wait_time_eviction", batch_size=10).deleted == 3
    assert world.tids(q) == [m["transactionId"] for m in leased["messages"]]
    assert dead[0] in world.tids(q)


# -- the wildcard index and idle partitions ----------------------------------------------
def test_emptied_partition_leaves_the_wildcard_index_and_comes_back_on_push(
    world: World, ses: Session
) -> None:
    q = qname()
    world.configure(q, retentionEnabled=True, retentionSeconds=60)
    world.push(q, 3, partition="gone")
    world.push(q, 2, partition="half", tag="old")
    world.age(q, 3600)
    newest = world.push(q, 1, partition="half", tag="new")
    assert world.lookup(q, "gone") is not None

    assert cleanup_messages(ses, "retention", batch_size=100).deleted == 5
    assert world.lookup(q, "gone") is None  # no longer a wildcard candidate
    half = world.lookup(q, "half")
    assert half is not None and half[1] == newest[0]

    # A push brings the partition back as a candidate and its message is delivered.
    again = world.push(q, 1, partition="gone", tag="again")
    assert world.lookup(q, "gone") is not None
    got = world.pop(q, 10, partition="gone")
    assert [m["transactionId"] for m in got["messages"]] == again


def test_index_points_at_newest_remaining_message_when_the_newest_is_deleted(
    world: World, ses: Session
) -> None:
    q = qname()
    world.configure(q, retentionEnabled=True, completedRetentionSeconds=60)
    world.push(q, 3)
    dead = world.consume(q, 1, status="dlq")
    world.consume(q, 2)
    world.age(q, 3600)
    assert cleanup_messages(ses, "completed_retention", batch_size=10).deleted == 2
    row = world.lookup(q)
    assert row is not None and row[1] == dead[0]  # not a dangling id
    # Queue mode has consumed everything: no wasted claim of this partition.
    assert world.pop(q, 10)["messages"] == []


def test_idle_empty_partitions_are_deleted_busy_or_recent_ones_kept(
    world: World, ses: Session
) -> None:
    q = qname()
    world.push(q, 1, partition="idle")
    world.push(q, 1, partition="full")
    world.push(q, 1, partition="recent")
    world.sql(
        """DELETE FROM queen.messages m USING queen.partitions p, queen.queues qq
            WHERE m.partition_id = p.id AND p.queue_id = qq.id AND qq.name = %s
              AND p.name IN ('idle', 'recent')""",
        (q,),
    )
    world.sql(
        """UPDATE queen.partitions p SET last_activity = now() - interval '31 days'
             FROM queen.queues qq WHERE qq.id = p.queue_id AND qq.name = %s
              AND p.name IN ('idle', 'full')""",
        (q,),
    )
    world.sql(  # the last write of a partition that had messages (migration 0020)
        """UPDATE queen.partition_counters pc SET last_activity = now() - interval '31 days'
             FROM queen.partitions p, queen.queues qq
            WHERE pc.partition_id = p.id AND qq.id = p.queue_id AND qq.name = %s
              AND p.name IN ('idle', 'full')""",
        (q,),
    )

    totals = cleanup_partitions(ses, days=30, batch_size=1)

    assert totals.deleted == 1
    names = [r[0] for r in world.sql(
        """SELECT p.name FROM queen.partitions p JOIN queen.queues qq ON qq.id = p.queue_id
            WHERE qq.name = %s ORDER BY p.name""", (q,))]  # fmt: skip
    assert names == ["full", "recent"]
    assert world.history(q, "partition_cleanup") == [0]
    # A push to the deleted name simply creates the partition again.
    world.push(q, 1, partition="idle")
    assert len(world.tids(q, "idle")) == 1


# -- one process at a time --------------------------------------------------------------
def test_concurrent_batches_never_delete_a_message_twice(world: World, migrated_dsn: str) -> None:
    queues = [qname() for _ in range(3)]
    for q in queues:
        world.configure(q, retentionEnabled=True, retentionSeconds=60)
        for part in ("p1", "p2", "p3"):
            world.push(q, 40, partition=part)
        world.age(q, 3600)
    results: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with session(migrated_dsn, 30000, 5000) as s:
                results.append(cleanup_messages(s, "retention", batch_size=9).deleted)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(results) == 360
    recorded = world.one(
        "SELECT sum(messages_deleted) FROM queen.retention_history WHERE queue_name = ANY(%s)",
        (queues,),
    )
    assert recorded == 360
    assert world.one(
        """SELECT count(*) FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
             JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = ANY(%s)""", (queues,)
    ) == 0  # fmt: skip


def test_only_one_process_runs_a_service_at_a_time(world: World, migrated_dsn: str) -> None:
    q = qname()
    world.configure(q, maxWaitTimeSeconds=60)
    world.push(q, 5)
    world.age(q, 3600)
    a = ExclusiveService(migrated_dsn, EvictionJob(batch_size=2), 60.0, owner="a")
    b = ExclusiveService(migrated_dsn, EvictionJob(batch_size=2), 60.0, owner="b")

    # While another session holds the service's lock, nobody runs it.
    holder = psycopg2.connect(migrated_dsn)
    holder.autocommit = True
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (lock_key("eviction"),))
        assert a.run_once().status == "locked"
        assert b.run_once(force=True).status == "locked"
        with holder.cursor() as cur:  # let go now (a closed session's backend does so later)
            cur.execute("SELECT pg_advisory_unlock(%s)", (lock_key("eviction"),))
    finally:
        holder.close()
    assert len(world.tids(q)) == 5

    first = a.run_once()
    assert first.status == "ran" and first.result["deleted"] == 5
    # The shared schedule: the interval has not passed, whichever process asks.
    assert b.run_once().status == "not_due"
    assert a.run_once().status == "not_due"
    runs = world.sql("SELECT owner, runs, result ->> 'deleted' FROM queen.service_runs "
                     "WHERE service = 'eviction'")  # fmt: skip
    assert runs == [("a", 1, "5")]


def test_simultaneous_turns_run_the_job_once(world: World, migrated_dsn: str) -> None:
    q = qname()
    world.configure(q, retentionEnabled=True, retentionSeconds=60)
    world.push(q, 30)
    world.age(q, 3600)
    services = [
        ExclusiveService(migrated_dsn, RetentionJob(3, 30, 90), 60.0, owner=f"p{i}")
        for i in range(4)
    ]
    outcomes = race_run_once(services)
    assert outcomes.count("ran") == 1
    assert set(outcomes) <= {"ran", "locked", "not_due"}
    assert sum(world.history(q, "retention")) == 30
    assert world.tids(q) == []


def test_a_runtime_runs_both_services_on_their_intervals(
    world: World, make_runtime: Callable[..., Runtime]
) -> None:
    kept, evicted = qname(), qname()
    world.configure(kept, retentionEnabled=True, retentionSeconds=60)
    world.configure(evicted, maxWaitTimeSeconds=60)
    world.push(kept, 4)
    world.push(evicted, 3)
    world.age(kept, 3600)
    world.age(evicted, 3600)
    runtime = make_runtime(RETENTION_INTERVAL="300", EVICTION_INTERVAL="300")

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (world.tids(kept) or world.tids(evicted)):
        time.sleep(0.1)
    assert world.tids(kept) == [] and world.tids(evicted) == []
    assert sum(world.history(kept, "retention")) == 4
    assert sum(world.history(evicted, "max_wait_time_eviction")) == 3
    stats = runtime.operations.stats()
    assert stats["retention"]["intervalMs"] == 300
    services = {r[0] for r in world.sql("SELECT service FROM queen.service_runs")}
    assert {"retention", "eviction"} <= services
    assert services <= {"retention", "eviction", "metrics", "timers_retention"}
