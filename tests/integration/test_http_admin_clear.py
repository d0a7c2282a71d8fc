"""DELETE /api/v1/queues/{queue}/clear[?partition=] through HTTP, and the locking of
queen.clear_queue_v1 against a pop that runs at the same moment."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

from tests.integration.conftest import AdminApi


def lookup_rows(admin: AdminApi, queue: str) -> list[tuple[Any, ...]]:
    """The wildcard candidate rows (queen.partition_lookup) of a queue's partitions."""
    return admin.sql(
        """SELECT p.name, pl.last_message_id FROM queen.partition_lookup pl
             JOIN queen.partitions p ON p.id = pl.partition_id
             JOIN queen.queues q ON q.id = p.queue_id
            WHERE q.name = %s ORDER BY p.name""",
        queue,
    )


def count(admin: AdminApi, table: str, queue: str) -> int:
    rows = admin.sql(
        f"""SELECT count(*) FROM queen.{table} t
              JOIN queen.partitions p ON p.id = t.partition_id
              JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = %s""",
        queue,
    )
    return int(rows[0][0])


def test_clear_removes_messages_and_what_belongs_to_them_and_keeps_the_queue(
    admin: AdminApi,
) -> None:
    admin.configure("cq", retryLimit=0, leaseTime=120, maxSize=50)
    admin.push("cq", [1, 2], partition="eu")
    admin.push("cq", [3], partition="us")
    admin.push("kept", [9])
    dead = admin.fail_next("cq", partition="eu")  # a DLQ row
    res = admin.post("/traces", {"transactionId": dead["transactionId"],
                                 "partitionId": dead["partitionId"], "data": {"x": 1}})  # fmt: skip
    assert res.status_code == 201
    admin.pop("cq", group="billing", partition="us")  # a named group holds a lease
    before = admin.get("/resources/queues/cq").json

    res = admin.delete("/queues/cq/clear")
    assert res.status_code == 200, res.text
    # traces: the consumer's own and the dead_lettered one the failed ack wrote
    assert res.json == {"cleared": True, "queue": "cq", "partition": None, "deleted": 3,
                        "deadLetters": 1, "traces": 2, "partitions": 3}  # fmt: skip

    after = admin.get("/resources/queues/cq").json
    assert after["id"] == before["id"] and after["options"] == before["options"]
    assert sorted(p["name"] for p in after["partitions"]) == ["Default", "eu", "us"]
    assert after["messages"] == {"total": 0, "pending": 0, "processing": 0, "completed": 0,
                                 "deadLettered": 0}  # fmt: skip
    assert sorted(after["consumerGroups"]) == ["__QUEUE_MODE__", "billing"]
    for table in ("messages", "dead_letter_queue", "message_traces"):
        assert count(admin, table, "cq") == 0, table
    cursors = admin.sql(
        """SELECT pc.consumer_group, pc.last_consumed_id, pc.lease_id, pc.batch_ids,
                  pc.retry_count FROM queen.partition_consumers pc
             JOIN queen.partitions p ON p.id = pc.partition_id
             JOIN queen.queues q ON q.id = p.queue_id
            WHERE q.name = 'cq' ORDER BY 1"""
    )
    assert [c[1:] for c in cursors] == [(0, None, None, 0)] * len(cursors) and cursors
    assert lookup_rows(admin, "cq") == []
    assert admin.get("/resources/queues/kept").json["messages"]["total"] == 1


def test_clear_one_partition_leaves_the_others(admin: AdminApi) -> None:
    admin.push("cp", [1, 2], partition="eu")
    admin.push("cp", [3], partition="us")
    res = admin.delete("/queues/cp/clear", partition="eu")
    assert res.status_code == 200
    assert (res.json["partition"], res.json["deleted"], res.json["partitions"]) == ("eu", 2, 1)
    assert [m["data"] for m in admin.pop("cp", batch=10)] == [3]
    assert [name for name, _ in lookup_rows(admin, "cp")] == ["us"]


def test_a_lease_on_cleared_messages_does_not_strand_the_partition(admin: AdminApi) -> None:
    admin.configure("cs", leaseTime=300)
    admin.push("cs", ["old-1", "old-2"], partition="p")
    [leased] = admin.pop("cs", partition="p")  # a consumer holds the partition for 300 s
    [leased_g] = admin.pop("cs", group="g", partition="p")
    assert admin.delete("/queues/cs/clear").status_code == 200

    admin.push("cs", ["new"], partition="p")
    # consumable at once, through the specific and the wildcard route, by every group
    assert [m["data"] for m in admin.pop("cs", partition="p")] == ["new"]
    assert [m["data"] for m in admin.pop("cs", group="g")] == ["new"]
    # the consumer that held the old lease gets a clean refusal, not a hang
    res = admin.post("/ack", {"transactionId": leased["transactionId"],
                              "partitionId": leased["partitionId"],
                              "leaseId": leased["leaseId"], "status": "completed"})  # fmt: skip
    assert res.status_code == 200 and res.json[0]["success"] is False
    assert leased_g["leaseId"] != leased["leaseId"]


def test_a_push_after_a_clear_recreates_the_wildcard_candidate(admin: AdminApi) -> None:
    admin.push("cw", [1, 2, 3])
    [m] = admin.pop("cw")
    admin.ack(m)  # queue mode's cursor is past message 1
    assert admin.delete("/queues/cw/clear").status_code == 200
    assert lookup_rows(admin, "cw") == []
    [pushed] = admin.push("cw", ["after"])
    assert lookup_rows(admin, "cw") == [("Default", int(pushed["message_id"]))]
    assert [m["data"] for m in admin.pop("cw", batch=10)] == ["after"]
    assert admin.get("/messages", queue="cw", status="pending").json["total"] == 0


@pytest.mark.parametrize(
    ("path", "params", "status", "error"),
    [
        ("/queues/nope/clear", {}, 404, "Queue nope not found"),
        ("/queues/cx/clear", {"partition": "nope"}, 404, "Partition nope of queue cx not found"),
        ("/queues/bad%20name/clear", {}, 400, "Invalid queue name"),
        ("/queues/cx/clear", {"partition": "bad name"}, 400, "Invalid partition name"),
    ],
)
def test_clear_bad_requests_change_nothing(
    admin: AdminApi, path: str, params: dict[str, str], status: int, error: str
) -> None:
    admin.push("cx", [1], partition="eu")
    before = admin.snapshot()
    res = admin.delete(path, **params)
    assert res.status_code == status and res.json["error"].startswith(error), res.json
    assert admin.snapshot() == before


def _connect(dsn: str) -> psycopg2.extensions.connection:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    return conn


def _waiting_for_a_lock(watcher: psycopg2.extensions.connection, pid: int) -> bool:
    with watcher.cursor() as cur:
        cur.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,))
        row = cur.fetchone()
    return row is not None and row[0] == "Lock"


def test_a_first_pop_during_a_clear_waits_for_it_and_leases_nothing_removed(
    admin: AdminApi, migrated_dsn: str
) -> None:
    """A group's first pop creates its cursor row, which needs a key-share lock on the
    partition row that the clear holds: it waits, then sees the emptied partition."""
    admin.push("cc", [1, 2])
    clearing, popping, watcher = (_connect(migrated_dsn) for _ in range(3))
    try:
        clearing.autocommit = False
        with clearing.cursor() as cur:
            cur.execute("SELECT queen.clear_queue_v1(%s::jsonb)", (json.dumps({"queue": "cc"}),))
        result: dict[str, Any] = {}

        def pop() -> None:
            with popping.cursor() as cur:
                request = {"idx": 0, "queue": "cc", "consumerGroup": "late", "batch": 10}
                cur.execute(
                    "SELECT queen.pop_unified_batch(%s::jsonb)::text", (json.dumps([request]),)
                )
                row = cur.fetchone()
                assert row is not None
                result.update(json.loads(row[0])[0])

        thread = threading.Thread(target=pop)
        thread.start()
        deadline = time.monotonic() + 10
        while not _waiting_for_a_lock(watcher, popping.get_backend_pid()):
            assert thread.is_alive() and time.monotonic() < deadline, result
            time.sleep(0.01)
        clearing.commit()
        thread.join(10)
        assert result["messages"] == [] and result["leaseId"] == ""
        assert admin.sql(
            "SELECT count(*) FROM queen.partition_consumers WHERE lease_expires_at > now()"
        ) == [(0,)]
    finally:
        for conn in (clearing, popping, watcher):
            conn.close()
