"""Many consumers (and producers) hitting the queue functions at once, each on its own
connection: exclusive partition leases, exactly-once acks, per-partition order."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

Conn = psycopg2.extensions.connection


def _connect(dsn: str) -> Conn:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    return conn


def _call(conn: Conn, fn: str, payload: Any) -> Any:
    with conn.cursor() as cur:
        cur.execute(f"SELECT queen.{fn}(%s::jsonb)::text", (json.dumps(payload),))
        row = cur.fetchone()
        assert row is not None
        return json.loads(row[0])


class Consumers:
    """N threads popping (queue mode, wildcard) and acking until `expected` acks succeeded."""

    def __init__(self, dsn: str, queue: str, expected: int, threads: int = 20, batch: int = 10):
        self.dsn, self.queue, self.expected = dsn, queue, expected
        self.n_threads, self.batch = threads, batch
        self.lock = threading.Lock()
        self.seq = 0
        self.acked = 0
        self.holder: dict[str, int] = {}
        self.violations: list[str] = []
        self.errors: list[BaseException] = []
        # partition -> [(seq, [payload...])] in the order batches were received
        self.batches: dict[str, list[tuple[int, list[Any]]]] = defaultdict(list)
        self.acked_tx: list[str] = []
        self.stop = threading.Event()
        self.producers_done = threading.Event()

    def run(self, timeout: float = 120.0, idle_limit: float = 5.0) -> None:
        threads = [threading.Thread(target=self._worker, args=(i,)) for i in range(self.n_threads)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + timeout
        last, last_change = -1, time.monotonic()
        while time.monotonic() < deadline and not self.stop.is_set():
            with self.lock:
                if self.acked >= self.expected or self.errors:
                    break
                if self.acked != last:
                    last, last_change = self.acked, time.monotonic()
            if self.producers_done.is_set() and time.monotonic() - last_change > idle_limit:
                break  # nothing left to deliver: the rest was lost
            time.sleep(0.02)
        self.stop.set()
        for t in threads:
            t.join(30)
        if self.errors:
            raise self.errors[0]

    def _worker(self, me: int) -> None:
        conn = _connect(self.dsn)
        try:
            while not self.stop.is_set():
                res = _call(
                    conn,
                    "pop_unified_batch",
                    [
                        {
                            "idx": me,
                            "queue": self.queue,
                            "batch": self.batch,
                            "leaseId": str(uuid.uuid4()),
                        }
                    ],
                )[0]
                msgs = res["messages"]
                if not msgs:
                    time.sleep(0.002)
                    continue
                part = res["partitionId"]
                with self.lock:
                    if self.holder.get(part) is not None:
                        self.violations.append(f"{part} held by {self.holder[part]} and {me}")
                    self.holder[part] = me
                    self.seq += 1
                    self.batches[part].append((self.seq, [m["data"] for m in msgs]))
                assert {m["partitionId"] for m in msgs} == {part}
                # ack one by one for odd workers, as one batch for even ones
                with self.lock:
                    self.holder[part] = None  # released by the ack below
                items = [
                    {
                        "transactionId": m["transactionId"],
                        "partitionId": m["partitionId"],
                        "status": "completed",
                        "leaseId": m["leaseId"],
                    }
                    for m in msgs
                ]
                if me % 2:
                    out = [_call(conn, "ack_messages_v2", {"acks": [it]})[0] for it in items]
                else:
                    out = _call(conn, "ack_messages_v2", {"acks": items})
                assert all(r["success"] for r in out), out
                assert out[-1]["leaseReleased"] is True
                with self.lock:
                    self.acked += len(out)
                    self.acked_tx.extend(it["transactionId"] for it in items)
        except BaseException as exc:  # reported by run()
            with self.lock:
                self.errors.append(exc)
            self.stop.set()
        finally:
            conn.close()


def _check_leases_free(dsn: str) -> None:
    conn = _connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM queen.partition_consumers WHERE lease_id IS NOT NULL")
            assert cur.fetchone() == (0,)
    finally:
        conn.close()


def test_twenty_consumers_share_ten_partitions_exactly_once(
    pg_conn: Conn, migrated_dsn: str
) -> None:
    partitions, per_partition = 10, 500
    for p in range(partitions):
        items = [
            {
                "queue": "conc",
                "partition": f"p{p}",
                "payload": {"p": p, "i": i},
                "transactionId": f"p{p}-{i}",
            }
            for i in range(per_partition)
        ]
        res = _call(pg_conn, "push_messages_v2", items)
        assert all(r["status"] == "queued" for r in res)
    total = partitions * per_partition

    consumers = Consumers(migrated_dsn, "conc", total, threads=20, batch=10)
    consumers.producers_done.set()
    consumers.run()

    assert consumers.violations == []
    assert consumers.acked == total
    assert len(consumers.acked_tx) == total and len(set(consumers.acked_tx)) == total
    assert len(consumers.batches) == partitions
    for batches in consumers.batches.values():
        seqs = [s for s, _ in batches]
        assert seqs == sorted(seqs)
        flat = [d for _, ds in batches for d in ds]
        assert [d["i"] for d in flat] == list(range(per_partition))
    _check_leases_free(migrated_dsn)


def test_consumers_keep_up_with_concurrent_producers_without_losing_order(
    pg_conn: Conn, migrated_dsn: str
) -> None:
    """Pushes committing while pops run must never be skipped by a cursor (ordering by
    (created_at, id) has to match commit order within a partition)."""
    producers, per_producer, partitions, chunk = 4, 600, 2, 50
    total = producers * per_producer
    errors: list[BaseException] = []

    def produce(k: int) -> None:
        conn = _connect(migrated_dsn)
        try:
            for start in range(0, per_producer, chunk):
                items = [
                    {
                        "queue": "conc2",
                        "partition": f"p{(start // chunk + k) % partitions}",
                        "payload": {"k": k, "i": i},
                        "transactionId": f"{k}-{i}",
                    }
                    for i in range(start, start + chunk)
                ]
                res = _call(conn, "push_messages_v2", items)
                assert all(r["status"] == "queued" for r in res)
        except BaseException as exc:
            errors.append(exc)
        finally:
            conn.close()

    _call(pg_conn, "configure_queue_v1", {"queue": "conc2", "options": {}})
    consumers = Consumers(migrated_dsn, "conc2", total, threads=12, batch=25)
    runner = threading.Thread(target=consumers.run, kwargs={"timeout": 120.0})
    runner.start()
    prods = [threading.Thread(target=produce, args=(k,)) for k in range(producers)]
    for t in prods:
        t.start()
    for t in prods:
        t.join()
    consumers.producers_done.set()
    runner.join()

    assert errors == []
    assert consumers.errors == []
    assert consumers.violations == []
    assert consumers.acked == total, f"{consumers.acked} of {total} delivered"
    assert len(set(consumers.acked_tx)) == total
    # every producer's messages arrive in the order it pushed them
    seen: dict[int, list[int]] = defaultdict(list)
    for batches in consumers.batches.values():
        for _, ds in sorted(batches, key=lambda b: b[0]):
            for d in ds:
                seen[d["k"]].append(d["i"])
    for k in range(producers):
        assert sorted(seen[k]) == list(range(per_producer))
    per_partition: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for part, batches in consumers.batches.items():
        for _, ds in sorted(batches, key=lambda b: b[0]):
            per_partition[part].extend((d["k"], d["i"]) for d in ds)
    for items in per_partition.values():
        for k in range(producers):
            mine = [i for kk, i in items if kk == k]
            assert mine == sorted(mine)
    _check_leases_free(migrated_dsn)


def test_a_push_committing_late_is_never_behind_a_cursor(pg_conn: Conn, migrated_dsn: str) -> None:
    """Push A is open (not committed) when push B to the same partition arrives. B must not
    become visible before A, or a consumer could move its cursor past A's slot."""
    _call(pg_conn, "push_messages_v2", [{"queue": "late", "payload": "seed", "transactionId": "s"}])
    conn_a = psycopg2.connect(migrated_dsn)  # not autocommit: stays open
    done_b = threading.Event()
    errors: list[BaseException] = []

    def push_b() -> None:
        try:
            conn_b = _connect(migrated_dsn)
            _call(
                conn_b,
                "push_messages_v2",
                [{"queue": "late", "payload": "b", "transactionId": "b"}],
            )
            conn_b.close()
        except BaseException as exc:
            errors.append(exc)
        finally:
            done_b.set()

    try:
        with conn_a.cursor() as cur:
            cur.execute(
                "SELECT queen.push_messages_v2(%s::jsonb)",
                (json.dumps([{"queue": "late", "payload": "a", "transactionId": "a"}]),),
            )
        t = threading.Thread(target=push_b)
        t.start()
        assert not done_b.wait(0.5), "push B must wait for the open push A of the same partition"
        # a consumer meanwhile sees only what is committed, and acks it
        got = _call(pg_conn, "pop_unified_batch", [{"idx": 0, "queue": "late", "batch": 10}])[0]
        assert [m["data"] for m in got["messages"]] == ["seed"]
        acks = [
            {
                "transactionId": m["transactionId"],
                "partitionId": m["partitionId"],
                "leaseId": m["leaseId"],
            }
            for m in got["messages"]
        ]
        assert all(r["success"] for r in _call(pg_conn, "ack_messages_v2", {"acks": acks}))
        conn_a.commit()
        t.join(10)
        assert errors == []
    finally:
        conn_a.close()
    got = _call(pg_conn, "pop_unified_batch", [{"idx": 0, "queue": "late", "batch": 10}])[0]
    assert [m["data"] for m in got["messages"]] == ["a", "b"]


def test_a_push_in_an_old_transaction_lands_after_what_consumers_already_saw(
    pg_conn: Conn, migrated_dsn: str
) -> None:
    """Message timestamps are taken when the push runs (after the partition lock), not at
    transaction start: a push inside a transaction that began earlier must still sort after
    messages that were committed and consumed meanwhile."""
    conn_a = psycopg2.connect(migrated_dsn)
    try:
        with conn_a.cursor() as cur:
            cur.execute("SELECT now()")  # transaction A starts here
        time.sleep(0.05)
        _call(
            pg_conn, "push_messages_v2", [{"queue": "old-tx", "payload": "b", "transactionId": "b"}]
        )
        got = _call(pg_conn, "pop_unified_batch", [{"idx": 0, "queue": "old-tx", "batch": 10}])[0]
        assert [m["data"] for m in got["messages"]] == ["b"]
        acks = [
            {
                "transactionId": m["transactionId"],
                "partitionId": m["partitionId"],
                "leaseId": m["leaseId"],
            }
            for m in got["messages"]
        ]
        assert all(r["success"] for r in _call(pg_conn, "ack_messages_v2", {"acks": acks}))
        with conn_a.cursor() as cur:
            cur.execute(
                "SELECT queen.push_messages_v2(%s::jsonb)",
                (json.dumps([{"queue": "old-tx", "payload": "a", "transactionId": "a"}]),),
            )
        conn_a.commit()
    finally:
        conn_a.close()
    got = _call(pg_conn, "pop_unified_batch", [{"idx": 0, "queue": "old-tx", "batch": 10}])[0]
    assert [m["data"] for m in got["messages"]] == ["a"]


def _blocked_on_a_lock(conn: Conn, pid: int) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,))
        row = cur.fetchone()
        return row is not None and row[0] == "Lock"


@pytest.mark.parametrize("what", ["queue", "partition"])
def test_deleting_what_an_open_push_writes_to_leaves_no_message_behind(
    pg_conn: Conn, migrated_dsn: str, what: str
) -> None:
    """Messages have no foreign key to their partition (migration 0009): a delete of the
    partition (or its queue) while a push into it is open must wait for the push and then
    take its messages with it."""
    _call(pg_conn, "push_messages_v2", [{"queue": "gone", "partition": "p", "payload": 0}])
    _call(pg_conn, "push_messages_v2", [{"queue": "stays", "payload": 0}])
    with pg_conn.cursor() as cur:
        cur.execute("SELECT p.id FROM queen.partitions p WHERE p.name = 'p'")
        (partition_id,) = cur.fetchone() or (None,)
    conn_push = psycopg2.connect(migrated_dsn)  # not autocommit: the push stays open
    conn_delete = _connect(migrated_dsn)
    done = threading.Event()
    errors: list[BaseException] = []

    def delete() -> None:
        try:
            with conn_delete.cursor() as cur:
                if what == "queue":
                    cur.execute("DELETE FROM queen.queues WHERE name = 'gone'")
                else:
                    cur.execute("DELETE FROM queen.partitions WHERE id = %s", (partition_id,))
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    try:
        with conn_push.cursor() as cur:
            items = [{"queue": "gone", "partition": "p", "payload": i} for i in range(1, 4)]
            cur.execute("SELECT queen.push_messages_v2(%s::jsonb)", (json.dumps(items),))
        t = threading.Thread(target=delete)
        t.start()
        deadline = time.monotonic() + 10
        while not _blocked_on_a_lock(pg_conn, conn_delete.get_backend_pid()):
            assert not done.is_set(), "the delete must wait for the open push"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        conn_push.commit()
        t.join(10)
        assert errors == []
    finally:
        conn_push.close()
        conn_delete.close()
    with pg_conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM queen.messages WHERE partition_id = %s", (partition_id,))
        assert cur.fetchone() == (0,)
        cur.execute("SELECT count(*) FROM queen.messages")
        assert cur.fetchone() == (1,)  # the other queue's message stays
