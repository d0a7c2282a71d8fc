"""Wake-ups after the commit: the server's push and ack statements send no NOTIFY from
inside their transaction (queen.server_wakes); the server sends them afterwards with
queen.wake_batch_v2 (to the processes that wait for them: test_wake_interest.py). Every
other writer (plain SQL) still notifies at commit."""

from __future__ import annotations

import json
import select
import uuid
from typing import Any

import psycopg2.extensions

from queen_threads.db import Database
from queen_threads.queue.store import QueueStore
from queen_threads.wake.store import WakeStore

Conn = psycopg2.extensions.connection


def listening(dsn: str) -> Conn:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("LISTEN queen_wakeup")
    return conn


def heard(conn: Conn, timeout: float = 1.0) -> list[dict[str, Any]]:
    """Everything NOTIFYed so far (waits up to `timeout` for the first one)."""
    if not conn.notifies:
        select.select([conn], [], [], timeout)
    conn.poll()
    events = [json.loads(n.payload) for n in conn.notifies]
    conn.notifies.clear()
    return events


def item(queue: str) -> dict[str, Any]:
    return {"queue": queue, "partition": "P", "payload": 1, "transactionId": str(uuid.uuid4())}


def test_the_servers_push_and_ack_notify_nobody_from_inside(
    migrated_dsn: str, database: Database
) -> None:
    listener = listening(migrated_dsn)
    store = QueueStore(database)
    queue = f"wake-{uuid.uuid4().hex[:8]}"
    [pushed] = store.push([item(queue)])
    assert pushed["status"] == "queued"
    [popped] = store.pop([{"queue": queue, "batch": 1, "leaseId": str(uuid.uuid4())}])
    [message] = popped["messages"]
    [acked] = store.ack([{"transactionId": message["transactionId"],
                          "partitionId": message["partitionId"], "status": "completed",
                          "consumerGroup": "__QUEUE_MODE__",
                          "leaseId": message.get("leaseId")}])  # fmt: skip
    assert acked["success"] and acked["leaseReleased"]
    assert heard(listener, 0.3) == []
    listener.close()


def test_a_plain_sql_push_still_notifies_at_commit(migrated_dsn: str, pg_conn: Conn) -> None:
    listener = listening(migrated_dsn)
    queue = f"wake-{uuid.uuid4().hex[:8]}"
    with pg_conn.cursor() as cur:
        cur.execute("SELECT queen.push_messages_v2(%s::jsonb)", (json.dumps([item(queue)]),))
    pg_conn.commit()
    assert [(e["kind"], e["queue"]) for e in heard(listener)] == [("push", queue)]
    listener.close()


def test_wake_batch_notifies_every_wanted_event_with_namespace_task_and_origin(
    migrated_dsn: str, database: Database
) -> None:
    listener = listening(migrated_dsn)
    store = QueueStore(database)
    queue = f"ns{uuid.uuid4().hex[:6]}.task.q"
    store.push([item(queue)])  # creates the queue (namespace and task from its name)
    WakeStore(database).want({"origin": "proc-2", "ttlMs": 60_000, "selectors": [{"queue": queue}]})
    events = [
        {"kind": "push", "queue": queue, "partition": "P"},
        {"kind": "free", "queue": queue, "partition": "P", "consumerGroup": "g", "delayMs": 50},
    ]
    assert WakeStore(database).notify({"origin": "proc-1", "events": events}) == 2
    got = heard(listener)
    if len(got) < 2:
        got += heard(listener)
    namespace, task = queue.split(".")[:2]
    wanted = [e | {"namespace": namespace, "task": task, "origin": "proc-1"} for e in events]
    assert sorted(got, key=lambda e: e["kind"]) == sorted(wanted, key=lambda e: e["kind"])
    listener.close()
