"""Offsets on PostgreSQL (migration 0015, docs/reads.md): the numbering of existing
messages, plain SQL writers, and commit order under concurrent pushes."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import psycopg2.extensions

from queen_threads.paths import SCHEMA_DIR

Conn = psycopg2.extensions.connection


def sql(conn: Conn, statement: str, *args: Any) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(statement, args)
        return cur.fetchall() if cur.description else []


def push(conn: Conn, queue: str, partition: str, count: int) -> None:
    items = [{"queue": queue, "partition": partition, "payload": i} for i in range(count)]
    sql(conn, "SELECT queen.push_messages_v2(%s::jsonb)", json.dumps(items))


def offsets(conn: Conn, queue: str, partition: str) -> list[int]:
    return [
        r[0]
        for r in sql(
            conn,
            """
        SELECT m.partition_offset FROM queen.messages m
          JOIN queen.partitions p ON p.id = m.partition_id
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE q.name = %s AND p.name = %s ORDER BY m.created_at, m.id""",
            queue,
            partition,
        )
    ]


def test_the_migration_numbers_existing_messages_in_partition_order(pg_conn: Conn) -> None:
    push(pg_conn, "mig", "a", 3)
    push(pg_conn, "mig", "b", 2)
    push(pg_conn, "mig", "a", 2)
    # As before 0015: no offsets, no watermark.
    sql(pg_conn, "ALTER TABLE queen.messages ALTER COLUMN partition_offset DROP NOT NULL")
    sql(pg_conn, "UPDATE queen.messages SET partition_offset = NULL")
    sql(pg_conn, "UPDATE queen.partitions SET next_offset = 0")
    text = (SCHEMA_DIR / "migrations" / "0015_offset_reads.sql").read_text()
    backfill = re.findall(r"^UPDATE queen\.\w+ \w\n.*?;", text, re.MULTILINE | re.DOTALL)
    assert len(backfill) == 2
    for statement in backfill:
        sql(pg_conn, statement)
    assert offsets(pg_conn, "mig", "a") == [0, 1, 2, 3, 4]
    assert offsets(pg_conn, "mig", "b") == [0, 1]
    watermarks = dict(sql(pg_conn, "SELECT name, next_offset FROM queen.partitions"))
    assert watermarks == {"a": 5, "b": 2}


def test_a_plain_sql_insert_gets_the_next_offset(pg_conn: Conn) -> None:
    push(pg_conn, "plain", "p", 2)
    sql(
        pg_conn,
        """
        INSERT INTO queen.messages (transaction_id, partition_id, payload)
        SELECT 'by-hand', p.id, '1' FROM queen.partitions p WHERE p.name = 'p'""",
    )
    push(pg_conn, "plain", "p", 1)
    assert offsets(pg_conn, "plain", "p") == [0, 1, 2, 3]


def test_concurrent_pushes_commit_in_offset_order(migrated_dsn: str) -> None:
    """Every snapshot sees a prefix of a partition's offsets: a reader that saw the high
    watermark W never finds, later, a record below W it did not see."""
    setup = psycopg2.connect(migrated_dsn)
    setup.autocommit = True
    push(setup, "race", "p", 1)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        conn = psycopg2.connect(migrated_dsn)
        conn.autocommit = True
        try:
            while not stop.is_set():
                push(conn, "race", "p", 3)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(200):
            rows = sql(
                setup,
                """
                SELECT coalesce(pc.next_offset, 0),
                       coalesce(array_agg(m.partition_offset
                                          ORDER BY m.partition_offset), '{}')
                  FROM queen.partitions p
                  LEFT JOIN queen.partition_counters pc ON pc.partition_id = p.id
                  LEFT JOIN queen.messages m ON m.partition_id = p.id
                 WHERE p.name = 'p' GROUP BY pc.next_offset""",
            )
            watermark, seen = rows[0]
            assert seen == list(range(watermark))
    finally:
        stop.set()
        for t in threads:
            t.join()
        setup.close()
    assert not errors
