"""The push of one known partition (queen.push_partition_v1, what QueueStore.push calls when
every item names one partition whose id it learnt), and the partition's counters row
(migration 0020) that orders pushes, on plain PostgreSQL."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import psycopg2

from queen_threads.db import Database
from queen_threads.queue.store import QueueStore
from queen_threads.wake.store import WakeStore
from tests.integration.test_sql_queue_core import Conn, configure, push, sql


def _partition(conn: Conn, queue: str, partition: str = "Default") -> str:
    rows = sql(
        conn,
        "SELECT p.id::text FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id"
        " WHERE q.name = %s AND p.name = %s",
        queue,
        partition,
    )
    assert len(rows) == 1
    return str(rows[0][0])


def _push_partition(conn: Conn, pid: str, items: list[dict[str, Any]]) -> Any:
    rows = sql(conn, "SELECT queen.push_partition_v1(%s::uuid, %s::jsonb)", pid, json.dumps(items))
    return None if rows[0][0] is None else json.loads(rows[0][0])


def test_it_stores_and_answers_as_the_general_push_does(pg_conn: Conn) -> None:
    first = push(pg_conn, "pp", [0], partition="a")
    pid = first[0]["partition_id"]
    rows = _push_partition(
        pg_conn,
        pid,
        [
            {"queue": "pp", "partition": "a", "payload": 1, "transactionId": "t1"},
            {"queue": "pp", "partition": "a", "payload": 2},
        ],
    )
    assert [r[0] for r in rows] == ["queued", "queued"]
    assert [r[2] for r in rows] == [pid, pid]
    assert rows[0][6] is None and rows[1][6] is not None  # only the generated txn
    # a duplicate: the retry with the probe answers it
    again = _push_partition(
        pg_conn, pid, [{"queue": "pp", "partition": "a", "payload": 9, "transactionId": "t1"}]
    )
    assert again[0][:2] == ["duplicate", rows[0][1]]
    stored = sql(
        pg_conn,
        "SELECT payload, partition_offset FROM queen.messages WHERE partition_id = %s"
        " ORDER BY partition_offset",
        pid,
    )
    assert stored == [(0, 0), (1, 1), (2, 2)]
    assert sql(
        pg_conn, "SELECT next_offset FROM queen.partition_counters WHERE partition_id = %s", pid
    ) == [(3,)]


def declinable(conn: Conn, prefix: str) -> tuple[str, str, str]:
    """Partitions a and b of queue `<prefix>.one` and the one partition of the capped queue
    `<prefix>.capped`, each with a message: (a, b, capped)."""
    push(conn, f"{prefix}.one", [0], partition="a")
    push(conn, f"{prefix}.one", [0], partition="b")
    configure(conn, f"{prefix}.capped", maxSize=5)
    push(conn, f"{prefix}.capped", [0])
    a, b = _partition(conn, f"{prefix}.one", "a"), _partition(conn, f"{prefix}.one", "b")
    return a, b, _partition(conn, f"{prefix}.capped")


def test_it_declines_what_it_cannot_push_without_writing(pg_conn: Conn) -> None:
    a, b, capped = declinable(pg_conn, "pp")
    before = sql(pg_conn, "SELECT count(*) FROM queen.messages")
    item = {"queue": "pp.one", "partition": "a", "payload": 1}
    assert _push_partition(pg_conn, b, [item]) is None  # another partition's id
    assert _push_partition(pg_conn, a, [item, {**item, "partition": "b"}]) is None  # two
    assert _push_partition(pg_conn, capped, [{"queue": "pp.capped", "payload": 1}]) is None
    assert _push_partition(pg_conn, "00000000-0000-0000-0000-000000000000", [item]) is None
    assert sql(pg_conn, "SELECT count(*) FROM queen.messages") == before
    assert sql(
        pg_conn,
        "SELECT next_offset FROM queen.partition_counters WHERE partition_id IN (%s, %s, %s)"
        " ORDER BY 1",
        a,
        b,
        capped,
    ) == [(1,), (1,), (1,)]


def test_the_store_pushes_a_known_partition_by_its_id(database: Database, pg_conn: Conn) -> None:
    wakes = WakeStore(database)
    store = QueueStore(database, saw_epoch=wakes.saw_epoch)
    wakes.want({"origin": "elsewhere", "ttlMs": 60_000, "selectors": [{"queue": "x"}]})
    item = {"queue": "pp.store", "partition": "Default", "payload": 1, "transactionId": "x1"}
    first = store.push([item])
    pid = first[0]["partition_id"]
    assert store.partition_ids.get(("pp.store", "Default")) == pid
    second = store.push([{**item, "transactionId": "x2"}, {**item, "transactionId": "x1"}])
    assert [r["status"] for r in second] == ["queued", "duplicate"]
    assert second[1]["message_id"] == first[0]["message_id"]
    assert wakes.epoch >= 1  # the epoch each write returned reached the wake store
    # a capped queue: declined, pushed by the general push, not tried again for a while
    configure(pg_conn, "pp.store.capped", maxSize=1)
    capped = {**item, "queue": "pp.store.capped"}
    assert store.push([capped])[0]["status"] == "queued"
    key = ("pp.store.capped", "Default")
    assert store.partition_ids.get(key) is not None
    full = store.push([{**capped, "transactionId": "x2"}])
    assert (full[0]["status"], full[0]["reason"]) == ("failed", "queue_full")
    assert store.partition_ids.get(key) is None
    store.push([{**capped, "transactionId": "x3"}])
    assert store.partition_ids.get(key) is None  # paused


def test_a_push_racing_the_cleanup_of_its_partition_stores_into_a_new_one(
    migrated_dsn: str, pg_conn: Conn
) -> None:
    """Retention deletes an idle empty partition under its counters row's lock while a push
    to it waits for that lock: the push's counters row then points at nothing (foreign key),
    and the push tries again, creating the partition anew."""
    old = push(pg_conn, "pp.race", [0])[0]["partition_id"]
    sql(pg_conn, "DELETE FROM queen.messages WHERE partition_id = %s", old)
    cleaner = psycopg2.connect(migrated_dsn)
    answer: list[Any] = []
    errors: list[BaseException] = []
    try:
        with cleaner.cursor() as cur:  # what ops_cleanup_partitions_v1 does, held open
            cur.execute(
                "SELECT 1 FROM queen.partition_counters WHERE partition_id = %s FOR UPDATE",
                (old,),
            )
            cur.execute("DELETE FROM queen.partitions WHERE id = %s", (old,))

        def pusher() -> None:
            conn = psycopg2.connect(migrated_dsn)
            conn.autocommit = True
            try:
                answer.extend(push(conn, "pp.race", [1]))
            except BaseException as exc:  # reported below
                errors.append(exc)
            finally:
                conn.close()

        thread = threading.Thread(target=pusher)
        thread.start()
        deadline = time.monotonic() + 10
        while not sql(
            pg_conn,
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE '%%push_messages_v2%%'",
        ):
            assert time.monotonic() < deadline, "the push never waited for the lock"
            time.sleep(0.01)
        cleaner.commit()
        thread.join(10)
    finally:
        cleaner.close()
    assert not errors
    assert answer[0]["status"] == "queued"
    new = answer[0]["partition_id"]
    assert new != old
    assert sql(pg_conn, "SELECT payload FROM queen.messages WHERE partition_id = %s", new) == [(1,)]
