"""The queue-core stored functions, exercised directly against a real PostgreSQL.

Every call goes through the same path the server uses: one statement
`SELECT queen.<fn>(%s::jsonb)::text` on an autocommit connection.
"""

from __future__ import annotations

import json
import select
import time
import uuid
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

Conn = psycopg2.extensions.connection


# --------------------------------------------------------------------------- helpers


def call(conn: Conn, fn: str, payload: Any) -> Any:
    with conn.cursor() as cur:
        cur.execute(f"SELECT queen.{fn}(%s::jsonb)::text", (json.dumps(payload),))
        row = cur.fetchone()
        assert row is not None
        return json.loads(row[0])


def sql(conn: Conn, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(query, args)
        return cur.fetchall() if cur.description else []


def configure(conn: Conn, queue: str, **options: Any) -> dict[str, Any]:
    res = call(conn, "configure_queue_v1", {"queue": queue, "options": options})
    assert res["configured"] is True
    return res


def push(
    conn: Conn, queue: str, payloads: list[Any], partition: str = "Default", **extra: Any
) -> list[dict[str, Any]]:
    items = [
        {
            "queue": queue,
            "partition": partition,
            "payload": p,
            "transactionId": str(uuid.uuid4()),
            **extra,
        }
        for p in payloads
    ]
    return call(conn, "push_messages_v2", items)


def pop(
    conn: Conn,
    queue: str | None,
    partition: str | None = None,
    *,
    batch: int = 1,
    group: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    req: dict[str, Any] = {
        "idx": 0,
        "queue": queue,
        "partition": partition,
        "batch": batch,
        "leaseId": str(uuid.uuid4()),
        "consumerGroup": group,
        **extra,
    }
    res = call(conn, "pop_unified_batch", [req])
    assert len(res) == 1
    return res[0]


def ack(
    conn: Conn,
    msgs: list[dict[str, Any]] | dict[str, Any],
    status: str = "completed",
    *,
    error: str | None = None,
    lease: bool = True,
    lease_id: str | None = None,
) -> list[dict[str, Any]]:
    if isinstance(msgs, dict):
        msgs = [msgs]
    items = []
    for m in msgs:
        item = {
            "transactionId": m["transactionId"],
            "partitionId": m["partitionId"],
            "status": status,
            "error": error,
            "consumerGroup": m.get("consumerGroup"),
        }
        if lease:
            item["leaseId"] = lease_id or m["leaseId"]
        items.append(item)
    return call(conn, "ack_messages_v2", {"acks": items})


def data(res: dict[str, Any]) -> list[Any]:
    return [m["data"] for m in res["messages"]]


def consumer_row(conn: Conn, partition_id: str, group: str = "__QUEUE_MODE__") -> dict[str, Any]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT * FROM queen.partition_consumers"
            " WHERE partition_id = %s AND consumer_group = %s",
            (partition_id, group),
        )
        row = cur.fetchone()
        assert row is not None and cur.description is not None
        return dict(zip([d.name for d in cur.description], row, strict=True))


def age_messages(conn: Conn, queue: str, seconds: float) -> None:
    """Pretend every message of `queue` was pushed `seconds` earlier."""
    sql(
        conn,
        """UPDATE queen.messages m SET created_at = m.created_at - make_interval(secs => %s)
             FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
            WHERE m.partition_id = p.id AND q.name = %s""",
        seconds,
        queue,
    )
    sql(
        conn,
        """UPDATE queen.partition_lookup pl
              SET last_message_created_at = pl.last_message_created_at - make_interval(secs => %s)
             FROM queen.queues q WHERE q.id = pl.queue_id AND q.name = %s""",
        seconds,
        queue,
    )
    sql(  # the ready index's instants (migration 0019) age with the messages
        conn,
        """UPDATE queen.partition_consumers pc
              SET head_created_at = pc.head_created_at - make_interval(secs => %s),
                  not_before = CASE WHEN pc.not_before < 'infinity'
                                    THEN pc.not_before - make_interval(secs => %s)
                                    ELSE pc.not_before END
             FROM queen.queues q WHERE q.id = pc.queue_id AND q.name = %s""",
        seconds,
        seconds,
        queue,
    )


def listen(dsn: str) -> Conn:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("LISTEN queen_wakeup")
    return conn


def notifications(conn: Conn, wait: float = 1.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + wait
    out: list[dict[str, Any]] = []
    while True:
        conn.poll()
        while conn.notifies:
            out.append(json.loads(conn.notifies.pop(0).payload))
        remaining = deadline - time.monotonic()
        if out or remaining <= 0:
            return out
        select.select([conn], [], [], remaining)


# --------------------------------------------------------------------------- configure


def test_configure_defaults_options_and_reset(pg_conn: Conn) -> None:
    res = call(pg_conn, "configure_queue_v1", {"queue": "orders.eu.v1", "options": {}})
    assert res["configured"] is True
    assert (res["queue"], res["namespace"], res["task"]) == ("orders.eu.v1", "orders", "eu")
    assert res["options"] == {
        "priority": 0,
        "leaseTime": 300,
        "retryLimit": 3,
        "retryDelay": 0,
        "retryStrategy": "fixed",
        "retryDelayMax": 3_600_000,
        "retryJitter": 0.1,
        "maxSize": 0,
        "ttl": 3600,
        "deadLetterQueue": False,
        "dlqAfterMaxRetries": False,
        "delayedProcessing": 0,
        "windowBuffer": 0,
        "retentionSeconds": 0,
        "completedRetentionSeconds": 0,
        "retentionEnabled": False,
        "encryptionEnabled": False,
        "maxWaitTimeSeconds": 0,
    }
    uuid.UUID(res["queueId"])
    default_pid = res["partitionId"]
    assert sql(pg_conn, "SELECT name FROM queen.partitions WHERE id = %s", default_pid) == [
        ("Default",)
    ]

    opts = {
        "leaseTime": 30,
        "maxSize": 10,
        "ttl": 60,
        "retryLimit": 5,
        "retryDelay": 250,
        "retryStrategy": "linear",
        "retryDelayMax": 5000,
        "retryJitter": 0.25,
        "deadLetterQueue": True,
        "dlqAfterMaxRetries": True,
        "priority": 7,
        "delayedProcessing": 2,
        "windowBuffer": 3,
        "retentionSeconds": 100,
        "completedRetentionSeconds": 50,
        "retentionEnabled": True,
        "encryptionEnabled": True,
        "maxWaitTimeSeconds": 90,
        "somethingUnknown": 1,
    }
    res = call(
        pg_conn,
        "configure_queue_v1",
        {"queue": "orders.eu.v1", "namespace": "ns", "task": "tk", "options": opts},
    )
    opts.pop("somethingUnknown")
    assert res["options"] == opts
    assert (res["namespace"], res["task"]) == ("ns", "tk")
    assert res["partitionId"] == default_pid
    # Reconfiguring without options resets every option to its default.
    res = call(pg_conn, "configure_queue_v1", {"queue": "orders.eu.v1", "options": {"priority": 1}})
    assert res["options"]["leaseTime"] == 300 and res["options"]["priority"] == 1
    assert res["options"]["encryptionEnabled"] is False
    assert sql(pg_conn, "SELECT count(*) FROM queen.queues") == [(1,)]

    bad = call(pg_conn, "configure_queue_v1", {"queue": None})
    assert bad["configured"] is False and bad["error"] == "queue is required"


# --------------------------------------------------------------------------- push


def test_push_autocreates_queue_with_namespace_and_task(pg_conn: Conn) -> None:
    push(pg_conn, "billing.invoices.eu", [1])
    push(pg_conn, "plain", [1], partition="p1")
    rows = sql(
        pg_conn,
        """SELECT q.name, q.namespace, q.task, p.name FROM queen.queues q
             JOIN queen.partitions p ON p.queue_id = q.id ORDER BY q.name""",
    )
    assert rows == [
        ("billing.invoices.eu", "billing", "invoices", "Default"),
        ("plain", "plain", "", "p1"),
    ]


def test_push_result_shape_and_input_order(pg_conn: Conn) -> None:
    trace = str(uuid.uuid4())
    items = [
        {"queue": "q", "partition": "b", "payload": 1, "transactionId": "t-0", "traceId": trace},
        {"queue": "q", "payload": 2, "transactionId": "t-1"},
        {"queue": "q2", "partition": "a", "payload": 3, "transactionId": "t-2"},
    ]
    res = call(pg_conn, "push_messages_v2", items)
    assert [r["index"] for r in res] == [0, 1, 2]
    assert [r["transaction_id"] for r in res] == ["t-0", "t-1", "t-2"]
    assert [r["transactionId"] for r in res] == ["t-0", "t-1", "t-2"]
    assert [r["status"] for r in res] == ["queued"] * 3
    assert [r["queueName"] for r in res] == ["q", "q", "q2"]
    assert res[0]["trace_id"] == trace and res[1]["trace_id"] is None
    assert all("error" not in r for r in res)
    for r in res:
        uuid.UUID(r["partition_id"])
        int(r["message_id"])
    # the {"items": [...]} form is accepted too
    res2 = call(pg_conn, "push_messages_v2", {"items": [{"queue": "q", "transactionId": "t-9"}]})
    assert res2[0]["status"] == "queued"
    assert call(pg_conn, "push_messages_v2", []) == []


def test_push_order_preserved_within_and_across_requests(pg_conn: Conn) -> None:
    first = push(pg_conn, "ord", list(range(200)))
    second = push(pg_conn, "ord", list(range(200, 260)))
    ids = [int(r["message_id"]) for r in first + second]
    assert ids == sorted(ids) and len(set(ids)) == 260
    got = pop(pg_conn, "ord", "Default", batch=1000)
    assert data(got) == list(range(260))
    created = [m["createdAt"] for m in got["messages"]]
    assert created == sorted(created)
    assert all(c.endswith("Z") and len(c) == len("2025-01-01T00:00:00.000000Z") for c in created)


def test_push_dedup_in_request_across_requests_and_per_partition(pg_conn: Conn) -> None:
    items = [
        {"queue": "dd", "payload": "first", "transactionId": "A"},
        {"queue": "dd", "payload": "second", "transactionId": "B"},
        {"queue": "dd", "payload": "again", "transactionId": "A"},
        {"queue": "dd", "partition": "other", "payload": "other-part", "transactionId": "A"},
    ]
    res = call(pg_conn, "push_messages_v2", items)
    assert [r["status"] for r in res] == ["queued", "queued", "duplicate", "queued"]
    assert res[2]["message_id"] == res[0]["message_id"]
    assert res[3]["message_id"] != res[0]["message_id"]

    res = call(
        pg_conn,
        "push_messages_v2",
        [
            {"queue": "dd", "payload": "retry", "transactionId": "A"},
            {"queue": "dd", "payload": "new", "transactionId": "C"},
        ],
    )
    assert [r["status"] for r in res] == ["duplicate", "queued"]
    first_a = call(pg_conn, "push_messages_v2", [{"queue": "dd", "transactionId": "A"}])
    assert first_a[0]["message_id"] == res[0]["message_id"]
    got = pop(pg_conn, "dd", "Default", batch=10)
    assert data(got) == ["first", "second", "new"]


def test_push_max_queue_size(pg_conn: Conn) -> None:
    configure(pg_conn, "cap", maxSize=3)
    assert [r["status"] for r in push(pg_conn, "cap", [1, 2])] == ["queued", "queued"]
    res = push(pg_conn, "cap", [3, 4])
    assert [r["status"] for r in res] == ["failed", "failed"]
    assert all("maximum size" in r["error"] and r["message_id"] is None for r in res)
    # other queues in the same request are unaffected, and nothing of the full queue is stored
    res = call(
        pg_conn,
        "push_messages_v2",
        [
            {"queue": "cap", "payload": 5, "transactionId": "x1"},
            {"queue": "cap", "payload": 6, "transactionId": "x2"},
            {"queue": "uncapped", "payload": 7, "transactionId": "x3"},
        ],
    )
    assert [r["status"] for r in res] == ["failed", "failed", "queued"]
    assert [r["status"] for r in push(pg_conn, "cap", [3])] == ["queued"]
    assert [r["status"] for r in push(pg_conn, "cap", [4])] == ["failed"]
    # consuming makes room again (depth counts what is beyond the queue-mode cursor)
    got = pop(pg_conn, "cap", batch=2)
    assert data(got) == [1, 2]
    assert all(r["success"] for r in ack(pg_conn, got["messages"]))
    assert [r["status"] for r in push(pg_conn, "cap", [4, 5])] == ["queued", "queued"]
    assert [r["status"] for r in push(pg_conn, "cap", [6])] == ["failed"]
    # a named group's progress does not count
    got = pop(pg_conn, "cap", batch=10, group="g")
    ack(pg_conn, got["messages"])
    assert [r["status"] for r in push(pg_conn, "cap", [6])] == ["failed"]


PAYLOADS: list[Any] = [
    None,
    {},
    [],
    [1, "two", None, {"three": 3}],
    "a string",
    "",
    0,
    -12.5,
    12345678901234567890,
    True,
    False,
    {"nested": {"deep": [{"x": None, "y": [1, 2, {"z": "ü€😀"}]}]}, "empty": {}},
]


def test_payloads_round_trip_exactly(pg_conn: Conn) -> None:
    push(pg_conn, "payloads", PAYLOADS)
    # a missing payload key is stored as JSON null
    call(pg_conn, "push_messages_v2", [{"queue": "payloads", "transactionId": "nokey"}])
    got = pop(pg_conn, "payloads", batch=100)
    assert data(got) == [*PAYLOADS, None]
    big = {"blob": "x" * 1_600_000, "list": list(range(1000))}
    push(pg_conn, "payloads-big", [big])
    assert data(pop(pg_conn, "payloads-big")) == [big]


def test_push_encrypted_flag_and_producer_sub_round_trip(pg_conn: Conn) -> None:
    cipher = {"encrypted": "AAAA", "iv": "BBBB", "authTag": "CCCC"}
    call(
        pg_conn,
        "push_messages_v2",
        [
            {
                "queue": "enc",
                "payload": cipher,
                "transactionId": "e1",
                "isEncrypted": True,
                "producerSub": "alice",
            },
            {"queue": "enc", "payload": {"plain": 1}, "transactionId": "e2"},
        ],
    )
    msgs = pop(pg_conn, "enc", batch=5)["messages"]
    assert [(m["isEncrypted"], m["data"], m["producerSub"]) for m in msgs] == [
        (True, cipher, "alice"),
        (False, {"plain": 1}, None),
    ]


# v3 (compact answer) takes the fast path of queen._push_items, v2 the general one.
@pytest.mark.parametrize("fn", ["push_messages_v2", "push_messages_v3"])
def test_push_notifies_once_per_partition_at_commit(
    pg_conn: Conn, migrated_dsn: str, fn: str
) -> None:
    listener = listen(migrated_dsn)
    try:
        call(
            pg_conn,
            fn,
            [
                {"queue": "ns1.job", "partition": "p1", "payload": 1, "transactionId": "1"},
                {"queue": "ns1.job", "partition": "p1", "payload": 2, "transactionId": "2"},
                {"queue": "ns1.job", "partition": "p2", "payload": 3, "transactionId": "3"},
            ],
        )
        got = notifications(listener)
        time.sleep(0.1)
        got += notifications(listener, wait=0.2)
        assert sorted(got, key=lambda n: n["partition"]) == [
            {
                "kind": "push",
                "queue": "ns1.job",
                "partition": "p1",
                "namespace": "ns1",
                "task": "job",
            },
            {
                "kind": "push",
                "queue": "ns1.job",
                "partition": "p2",
                "namespace": "ns1",
                "task": "job",
            },
        ]
        # only duplicates -> nothing queued -> no wake-up
        call(pg_conn, fn, [{"queue": "ns1.job", "partition": "p1", "transactionId": "1"}])
        assert notifications(listener, wait=0.3) == []
        # rolled back -> no wake-up
        with pg_conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(
                f"SELECT queen.{fn}(%s::jsonb)",
                (json.dumps([{"queue": "ns1.job", "transactionId": "rb"}]),),
            )
            cur.execute("ROLLBACK")
        assert notifications(listener, wait=0.3) == []
    finally:
        listener.close()


# --------------------------------------------------------------------------- pop


def test_pop_unknown_queue_or_partition_is_empty_and_creates_nothing(pg_conn: Conn) -> None:
    for req in (
        {"queue": "nope"},
        {"queue": "nope", "partition": "x"},
        {"namespace": "nope"},
        {"queue": "nope", "consumerGroup": "g", "subscriptionMode": "new"},
    ):
        res = call(pg_conn, "pop_unified_batch", [{"idx": 7, "batch": 5, **req}])[0]
        assert res["idx"] == 7 and res["success"] is True
        assert res["messages"] == [] and res["partitionsClaimed"] == 0 and res["leaseId"] == ""
    push(pg_conn, "exists", [1])
    assert pop(pg_conn, "exists", "missing-partition")["messages"] == []
    assert sql(pg_conn, "SELECT name FROM queen.queues") == [("exists",)]
    assert sql(pg_conn, "SELECT count(*) FROM queen.partitions") == [(1,)]


def test_pop_message_shape(pg_conn: Conn) -> None:
    trace = str(uuid.uuid4())
    push(pg_conn, "shape", [{"k": "v"}], partition="P", traceId=trace, producerSub="bob")
    res = pop(pg_conn, "shape", "P", group="grp")
    m = res["messages"][0]
    assert set(m) == {
        "id", "transactionId", "partitionId", "partition", "queue", "leaseId", "consumerGroup",
        "data", "traceId", "producerSub", "retryCount", "createdAt", "isEncrypted",
        "traceContext",
    }  # fmt: skip
    assert m["traceContext"] is None  # none was pushed (docs/observability.md)
    assert isinstance(m["id"], str)
    assert (m["partition"], m["queue"], m["consumerGroup"], m["traceId"]) == (
        "P",
        "shape",
        "grp",
        trace,
    )
    assert m["leaseId"] == res["leaseId"] and uuid.UUID(res["leaseId"])
    assert (res["queue"], res["partition"], res["partitionId"]) == ("shape", "P", m["partitionId"])
    assert res["partitionsClaimed"] == 1 and res["consumerGroup"] == "grp"
    assert m["retryCount"] == 0 and m["producerSub"] == "bob" and m["isEncrypted"] is False


def test_pop_lease_is_exclusive_per_partition_and_group(pg_conn: Conn) -> None:
    push(pg_conn, "lx", [1, 2, 3])
    a = pop(pg_conn, "lx", "Default", batch=2)
    assert data(a) == [1, 2]
    # same group: the partition is leased, wildcard and specific both get nothing
    assert pop(pg_conn, "lx", "Default")["messages"] == []
    assert pop(pg_conn, "lx")["messages"] == []
    # another group fans out independently
    assert data(pop(pg_conn, "lx", batch=10, group="other")) == [1, 2, 3]
    ack(pg_conn, a["messages"])
    assert data(pop(pg_conn, "lx", batch=10)) == [3]


def test_lease_expiry_is_reclaimed_and_old_lease_rejected(pg_conn: Conn) -> None:
    push(pg_conn, "exp", [1, 2])
    first = pop(pg_conn, "exp", batch=2)
    sql(
        pg_conn,
        "UPDATE queen.partition_consumers SET lease_expires_at = now() - interval '1 second'",
    )
    second = pop(pg_conn, "exp", batch=2)
    assert data(second) == [1, 2] and second["leaseId"] != first["leaseId"]
    late = ack(pg_conn, first["messages"][0])
    assert late[0]["success"] is False and late[0]["error"] == "Invalid or expired lease"
    assert all(r["success"] for r in ack(pg_conn, second["messages"]))
    assert pop(pg_conn, "exp")["messages"] == []


def test_wildcard_prefers_least_recently_consumed_partition(pg_conn: Conn) -> None:
    for p in ("p1", "p2", "p3"):
        push(pg_conn, "lrc", [f"{p}-a", f"{p}-b"], partition=p)
    seen = []
    for _ in range(6):
        res = pop(pg_conn, "lrc")
        assert len(res["messages"]) == 1
        seen.append(res["partition"])
        ack(pg_conn, res["messages"])
    # every partition is served before any is served twice
    assert sorted(seen[:3]) == ["p1", "p2", "p3"]
    assert sorted(seen[3:]) == ["p1", "p2", "p3"]
    assert pop(pg_conn, "lrc")["messages"] == []


def test_partitions_n_claims_several_with_global_batch_cap(pg_conn: Conn) -> None:
    for p in ("a", "b", "c", "d"):
        push(pg_conn, "multi", [f"{p}{i}" for i in range(5)], partition=p)
    res = pop(pg_conn, "multi", batch=7, partitions=3)
    msgs = res["messages"]
    assert len(msgs) == 7
    parts = [m["partition"] for m in msgs]
    assert 2 <= len(set(parts)) <= 3 and res["partitionsClaimed"] == len(set(parts))
    assert all(m["leaseId"] == res["leaseId"] for m in msgs)
    for p in set(parts):  # per partition: in order, from its beginning
        got = [m["data"] for m in msgs if m["partition"] == p]
        assert got == [f"{p}{i}" for i in range(len(got))]
    # all claimed partitions are leased; the rest are still available
    rest = pop(pg_conn, "multi", batch=100, partitions=10)
    assert {m["partition"] for m in rest["messages"]}.isdisjoint(parts)
    # batch ack releases every lease of the first pop
    assert all(r["success"] for r in ack(pg_conn, msgs))
    assert sql(
        pg_conn,
        "SELECT count(*) FROM queen.partition_consumers WHERE lease_id = %s",
        res["leaseId"],
    ) == [(0,)]
    # specific-partition pops ignore partitions=N
    push(pg_conn, "multi2", [1, 2], partition="x")
    push(pg_conn, "multi2", [3], partition="y")
    res = pop(pg_conn, "multi2", "x", batch=10, partitions=5)
    assert data(res) == [1, 2] and res["partitionsClaimed"] == 1


def test_namespace_and_task_pop(pg_conn: Conn) -> None:
    push(pg_conn, "shop.orders", ["o1"])
    push(pg_conn, "shop.refunds", ["r1"])
    push(pg_conn, "blog.orders", ["b1"])
    got = call(
        pg_conn,
        "pop_unified_batch",
        [
            {
                "idx": 0,
                "namespace": "shop",
                "batch": 10,
                "partitions": 5,
                "leaseId": str(uuid.uuid4()),
            }
        ],
    )[0]
    assert sorted(data(got)) == ["o1", "r1"]
    got = call(
        pg_conn,
        "pop_unified_batch",
        [{"idx": 0, "task": "orders", "batch": 10, "partitions": 5, "consumerGroup": "g"}],
    )[0]
    assert sorted(data(got)) == ["b1", "o1"]
    got = call(
        pg_conn,
        "pop_unified_batch",
        [{"idx": 0, "namespace": "blog", "task": "orders", "batch": 10, "consumerGroup": "h"}],
    )[0]
    assert data(got) == ["b1"] and got["queue"] == "blog.orders"


def test_autoack_moves_cursor_without_lease(pg_conn: Conn) -> None:
    push(pg_conn, "auto", [1, 2, 3])
    res = pop(pg_conn, "auto", batch=2, autoAck=True)
    assert data(res) == [1, 2]
    assert res["leaseId"] == "" and all(m["leaseId"] == "" for m in res["messages"])
    row = consumer_row(pg_conn, res["partitionId"])
    assert row["lease_id"] is None and row["last_consumed_id"] == int(res["messages"][1]["id"])
    assert data(pop(pg_conn, "auto", batch=5, autoAck=True)) == [3]
    # acking an auto-acked message is a harmless no-op
    r = ack(pg_conn, res["messages"][0], lease=False)[0]
    assert r["success"] is True and r["status"] == "already_acked"


def test_batch_of_requests_each_own_lease_and_stop_on_empty(pg_conn: Conn) -> None:
    for p in ("p1", "p2"):
        push(pg_conn, "many", [f"{p}-{i}" for i in range(3)], partition=p)
    leases = [str(uuid.uuid4()) for _ in range(4)]
    reqs = [
        {"idx": i, "queue": "many", "batch": b, "leaseId": leases[i], "stopOnEmpty": True}
        for i, b in enumerate([2, 5, 1, 1])
    ]
    res = call(pg_conn, "pop_unified_batch", reqs)
    assert [r["idx"] for r in res] == [0, 1, 2, 3]
    assert len(res[0]["messages"]) == 2 and len(res[1]["messages"]) == 3
    assert res[0]["partition"] != res[1]["partition"]
    assert [res[0]["leaseId"], res[1]["leaseId"]] == leases[:2]
    assert res[2]["messages"] == [] and res[2]["skipped"] is False
    assert res[3]["messages"] == [] and res[3]["skipped"] is True


# --------------------------------------------------------------------------- subscriptions


def test_subscription_new_is_persistent(pg_conn: Conn) -> None:
    push(pg_conn, "sub", ["old-1", "old-2"])
    res = pop(pg_conn, "sub", batch=10, group="g-new", subscriptionMode="new")
    assert res["messages"] == []
    # the empty 'new' pop created the cursor at now
    assert consumer_row(pg_conn, sql(pg_conn, "SELECT id FROM queen.partitions")[0][0], "g-new")
    push(pg_conn, "sub", ["new-1"])
    # later pops without (or with other) parameters keep the first subscription
    assert data(pop(pg_conn, "sub", batch=10, group="g-new", subscriptionMode="all")) == ["new-1"]
    # 'new-only' and subscriptionFrom=now are aliases
    push(pg_conn, "sub", ["new-2"])
    for group, extra in (
        ("g-only", {"subscriptionMode": "new-only"}),
        ("g-now", {"subscriptionFrom": "now"}),
    ):
        assert pop(pg_conn, "sub", batch=10, group=group, **extra)["messages"] == []
        push(pg_conn, "sub", [f"after-{group}"])
        assert data(pop(pg_conn, "sub", batch=10, group=group)) == [f"after-{group}"]
    # all / from_beginning / unknown / nothing: everything from the oldest
    for group, extra in (
        ("g-all", {"subscriptionMode": "all"}),
        ("g-begin", {"subscriptionMode": "from_beginning"}),
        ("g-weird", {"subscriptionMode": "whatever"}),
        ("g-none", {}),
    ):
        got = data(pop(pg_conn, "sub", batch=100, group=group, **extra))
        assert got[:3] == ["old-1", "old-2", "new-1"], group
    # queue mode ignores subscription modes
    assert data(pop(pg_conn, "sub", batch=2, subscriptionMode="new")) == ["old-1", "old-2"]


def test_subscription_new_without_messages_yet(pg_conn: Conn) -> None:
    configure(pg_conn, "sub-empty")
    assert pop(pg_conn, "sub-empty", group="g", subscriptionMode="new")["messages"] == []
    push(pg_conn, "sub-empty", ["later"])
    assert data(pop(pg_conn, "sub-empty", group="g")) == ["later"]


def test_subscription_from_timestamp(pg_conn: Conn) -> None:
    push(pg_conn, "subts", ["before"])
    time.sleep(0.01)
    (cut,) = sql(pg_conn, "SELECT queen._iso_us(clock_timestamp())")[0]
    time.sleep(0.01)
    push(pg_conn, "subts", ["after"])
    got = pop(pg_conn, "subts", batch=10, group="g-ts", subscriptionFrom=cut)
    assert data(got) == ["after"]
    rows = sql(
        pg_conn,
        """SELECT subscription_mode, queen._iso_us(subscription_timestamp)
             FROM queen.consumer_groups_metadata WHERE consumer_group = 'g-ts'""",
    )
    assert rows == [("timestamp", cut)]
    # a new partition reached later by the same group also starts after the timestamp
    push(pg_conn, "subts", ["p2-after"], partition="p2")
    sql(
        pg_conn,
        "UPDATE queen.messages SET created_at = %s::timestamptz - interval '1 hour' "
        "WHERE payload = '\"p2-after\"'::jsonb",
        cut,
    )
    push(pg_conn, "subts", ["p2-new"], partition="p2")
    assert data(pop(pg_conn, "subts", batch=10, group="g-ts")) == ["p2-new"]


def test_subscription_metadata_keys(pg_conn: Conn) -> None:
    push(pg_conn, "mk", [1])
    pop(pg_conn, "mk", "Default", group="g1", subscriptionMode="new")
    pop(pg_conn, "mk", group="g2")
    call(pg_conn, "pop_unified_batch", [{"idx": 0, "namespace": "mk", "consumerGroup": "g3"}])
    pop(pg_conn, "mk")  # queue mode stores nothing
    rows = sql(
        pg_conn,
        """SELECT consumer_group, queue_name, partition_name, namespace, task, subscription_mode,
                  subscription_timestamp IS NOT NULL
             FROM queen.consumer_groups_metadata ORDER BY consumer_group""",
    )
    assert rows == [
        ("g1", "mk", "Default", "", "", "new", True),
        ("g2", "mk", "", "", "", "all", False),
        ("g3", "", "", "mk", "", "all", False),
    ]


# --------------------------------------------------------------------------- visibility options


def test_delayed_processing(pg_conn: Conn) -> None:
    configure(pg_conn, "delayed", delayedProcessing=2)
    push(pg_conn, "delayed", [1])
    assert pop(pg_conn, "delayed")["messages"] == []
    assert pop(pg_conn, "delayed", "Default")["messages"] == []
    age_messages(pg_conn, "delayed", 2.5)
    push(pg_conn, "delayed", [2])
    assert data(pop(pg_conn, "delayed", batch=10)) == [1]  # 2 is still too young
    # no lease was left behind by the empty pops
    assert sql(
        pg_conn,
        "SELECT count(*) FROM queen.partition_consumers WHERE lease_id IS NOT NULL",
    ) == [(1,)]


def test_delayed_processing_real_time(pg_conn: Conn) -> None:
    configure(pg_conn, "delayed-rt", delayedProcessing=1)
    push(pg_conn, "delayed-rt", ["x"])
    assert pop(pg_conn, "delayed-rt")["messages"] == []
    time.sleep(1.1)
    assert data(pop(pg_conn, "delayed-rt")) == ["x"]


def test_window_buffer(pg_conn: Conn) -> None:
    configure(pg_conn, "win", windowBuffer=3)
    push(pg_conn, "win", [1, 2])
    assert pop(pg_conn, "win", batch=10)["messages"] == []
    assert pop(pg_conn, "win", "Default", batch=10)["messages"] == []
    age_messages(pg_conn, "win", 4)
    push(pg_conn, "win", [3])  # the partition is active again: wait for quiet
    assert pop(pg_conn, "win", batch=10)["messages"] == []
    age_messages(pg_conn, "win", 4)
    assert data(pop(pg_conn, "win", batch=10)) == [1, 2, 3]


def test_max_wait_time_hides_old_messages(pg_conn: Conn) -> None:
    configure(pg_conn, "mw", maxWaitTimeSeconds=10)
    push(pg_conn, "mw", ["stale"])
    age_messages(pg_conn, "mw", 20)
    assert pop(pg_conn, "mw")["messages"] == []
    push(pg_conn, "mw", ["fresh"])
    res = pop(pg_conn, "mw", batch=10)
    assert data(res) == ["fresh"]
    ack(pg_conn, res["messages"])
    assert pop(pg_conn, "mw", batch=10)["messages"] == []


# --------------------------------------------------------------------------- ack


def test_ack_completed_releases_lease_and_advances(pg_conn: Conn) -> None:
    push(pg_conn, "ack1", [1, 2, 3])
    res = pop(pg_conn, "ack1", batch=2)
    out = ack(pg_conn, res["messages"])
    assert [r["status"] for r in out] == ["completed", "completed"]
    assert [r["leaseReleased"] for r in out] == [False, True]
    assert out[0]["queueName"] == "ack1" and out[0]["partitionName"] == "Default"
    assert all(r["error"] is None and r["dlq"] is False for r in out)
    row = consumer_row(pg_conn, res["partitionId"])
    assert row["lease_id"] is None and row["last_consumed_id"] == int(res["messages"][1]["id"])
    assert row["total_messages_consumed"] == 2 and row["total_batches_consumed"] == 1
    assert data(pop(pg_conn, "ack1", batch=5)) == [3]


def test_ack_single_object_and_success_alias(pg_conn: Conn) -> None:
    push(pg_conn, "ack2", [1])
    m = pop(pg_conn, "ack2")["messages"][0]
    out = call(
        pg_conn,
        "ack_messages_v2",
        {
            "transactionId": m["transactionId"],
            "partitionId": m["partitionId"],
            "status": "success",
            "leaseId": m["leaseId"],
        },
    )
    assert out[0]["success"] is True and out[0]["status"] == "completed" and out[0]["leaseReleased"]


def test_cursor_moves_forward_only_on_out_of_order_acks(pg_conn: Conn) -> None:
    push(pg_conn, "ooo", [1, 2, 3, 4])
    res = pop(pg_conn, "ooo", batch=3)
    m1, m2, m3 = res["messages"]
    pid = res["partitionId"]

    # An ack is a commit: m2 completes the silent gap before it (m1), never what follows.
    r = ack(pg_conn, m2)[0]
    assert r["success"] and not r["leaseReleased"] and "noop" not in r
    row = consumer_row(pg_conn, pid)
    assert row["last_consumed_id"] == int(m2["id"]) and row["lease_id"] is not None

    # below the cursor: a completed ack is a flagged no-op, a nack is refused; never a rewind
    r = ack(pg_conn, m1)[0]
    assert r["success"] and r["status"] == "already_acked" and r["noop"] is True
    for status in ("failed", "retry", "dlq"):
        r = ack(pg_conn, m1, status)[0]
        assert r["success"] is False and r["error"].startswith("Already committed"), r
    assert consumer_row(pg_conn, pid)["last_consumed_id"] == int(m2["id"])
    assert sql(pg_conn, "SELECT count(*) FROM queen.dead_letter_queue") == [(0,)]

    r = ack(pg_conn, m3)[0]
    assert r["leaseReleased"] is True and "noop" not in r
    row = consumer_row(pg_conn, pid)
    assert row["last_consumed_id"] == int(m3["id"]) and row["lease_id"] is None
    assert data(pop(pg_conn, "ooo", batch=5)) == [4]


def test_an_ack_never_commits_past_a_nack_or_outside_its_batch(pg_conn: Conn) -> None:
    push(pg_conn, "gap", [1, 2, 3, 4, 5])
    res = pop(pg_conn, "gap", batch=3)
    m1, m2, m3 = res["messages"]
    # one request, [m1 completed, m2 failed, m3 completed]: the nack clamps the commit
    out = call(
        pg_conn,
        "ack_messages_v2",
        {"acks": [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                   "leaseId": res["leaseId"], "status": s}
                  for m, s in ((m1, "completed"), (m2, "failed"), (m3, "completed"))]},
    )  # fmt: skip
    assert [r["status"] for r in out[:2]] == ["completed", "failed_retry"]
    assert out[2]["success"] is False  # its lease was released by the nack before it
    assert data(pop(pg_conn, "gap", batch=5)) == [2, 3, 4, 5]  # never past m2, or m3


def test_out_of_order_acks_in_one_batch_request(pg_conn: Conn) -> None:
    push(pg_conn, "ooo2", list(range(10)))
    res = pop(pg_conn, "ooo2", batch=10)
    out = ack(pg_conn, list(reversed(res["messages"])))
    assert all(r["success"] for r in out)
    assert [r["index"] for r in out] == list(range(10))
    assert sum(r["leaseReleased"] for r in out) == 1
    assert consumer_row(pg_conn, res["partitionId"])["last_consumed_id"] == int(
        res["messages"][-1]["id"]
    )


def test_wrong_lease_rejected_without_state_change(pg_conn: Conn) -> None:
    push(pg_conn, "wl", [1, 2])
    res = pop(pg_conn, "wl", batch=2)
    before = consumer_row(pg_conn, res["partitionId"])
    for status in ("completed", "failed", "dlq", "retry"):
        out = ack(pg_conn, res["messages"], status, lease_id=str(uuid.uuid4()))
        assert all(r["success"] is False and r["error"] == "Invalid or expired lease" for r in out)
        out = ack(pg_conn, res["messages"][0], status, lease_id="not-a-uuid")
        assert out[0]["error"] == "Invalid or expired lease"
    assert consumer_row(pg_conn, res["partitionId"]) == before
    assert sql(pg_conn, "SELECT count(*) FROM queen.dead_letter_queue") == [(0,)]


def test_ack_message_not_found_and_unknown_status(pg_conn: Conn) -> None:
    push(pg_conn, "nf", [1])
    m = pop(pg_conn, "nf")["messages"][0]
    out = call(
        pg_conn,
        "ack_messages_v2",
        {
            "acks": [
                {"transactionId": "nope", "partitionId": m["partitionId"], "status": "completed"},
                {
                    "transactionId": m["transactionId"],
                    "partitionId": "garbage",
                    "status": "completed",
                },
                {
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "status": "bogus",
                },
            ]
        },
    )
    assert all(r["error"].startswith("Unresolvable transaction: ") for r in out[:2]), out
    assert out[2]["success"] is False and "bogus" in out[2]["error"]
    assert consumer_row(pg_conn, m["partitionId"])["lease_id"] is not None


def test_ack_without_lease_only_for_next_message(pg_conn: Conn) -> None:
    push(pg_conn, "nl", [1, 2, 3])
    pid = sql(pg_conn, "SELECT id::text FROM queen.partitions")[0][0]
    txns = [r[0] for r in sql(pg_conn, "SELECT transaction_id FROM queen.messages ORDER BY id")]

    def bare(txn: str) -> dict[str, Any]:
        return call(
            pg_conn, "ack_messages_v2", {"acks": [{"transactionId": txn, "partitionId": pid}]}
        )[0]

    r = bare(txns[1])
    assert r["success"] is False and "Earlier messages" in r["error"]
    assert bare(txns[0])["success"] is True
    assert bare(txns[1])["success"] is True
    assert data(pop(pg_conn, "nl", batch=5)) == [3]


def test_failed_ack_retries_then_dead_letters(pg_conn: Conn) -> None:
    configure(pg_conn, "rt", retryLimit=2)
    push(pg_conn, "rt", ["poison", "next"])
    counts = []
    for attempt in range(3):
        res = pop(pg_conn, "rt")
        m = res["messages"][0]
        assert m["data"] == "poison"
        counts.append(m["retryCount"])
        out = ack(pg_conn, m, "failed", error=f"boom {attempt}")[0]
        assert out["success"] is True and out["leaseReleased"] is True
        assert out["status"] == ("failed_retry" if attempt < 2 else "failed_dlq")
        assert out["dlq"] is (attempt == 2)
    assert counts == [0, 1, 2]
    dlq = sql(
        pg_conn,
        """SELECT d.error_message, d.retry_count, d.consumer_group, m.payload
             FROM queen.dead_letter_queue d JOIN queen.messages m ON m.id = d.message_id""",
    )
    assert dlq == [("boom 2", 2, "__QUEUE_MODE__", "poison")]
    nxt = pop(pg_conn, "rt")["messages"][0]
    assert nxt["data"] == "next" and nxt["retryCount"] == 0
    row = consumer_row(pg_conn, nxt["partitionId"])
    assert row["retry_message_id"] is None and row["retry_count"] == 0


def test_failed_ack_default_error_and_dlq_status(pg_conn: Conn) -> None:
    configure(pg_conn, "rt0", retryLimit=0)
    push(pg_conn, "rt0", ["a", "b", "c"])
    m = pop(pg_conn, "rt0")["messages"][0]
    assert ack(pg_conn, m, "failed")[0]["status"] == "failed_dlq"
    m = pop(pg_conn, "rt0")["messages"][0]
    assert m["data"] == "b"
    out = ack(pg_conn, m, "dlq", error="explicit")[0]
    assert out["status"] == "failed_dlq" and out["dlq"] is True
    rows = sql(
        pg_conn,
        "SELECT error_message, retry_count FROM queen.dead_letter_queue ORDER BY failed_at, id",
    )
    assert sorted(rows) == sorted([("Retries exhausted", 0), ("explicit", 0)])
    assert data(pop(pg_conn, "rt0")) == ["c"]


def test_failed_in_middle_of_batch_redelivers_from_failed_message(pg_conn: Conn) -> None:
    push(pg_conn, "mid", [1, 2, 3])
    res = pop(pg_conn, "mid", batch=3)
    m1, m2, m3 = res["messages"]
    ack(pg_conn, m1)
    out = ack(pg_conn, m2, "failed")[0]
    assert out["status"] == "failed_retry" and out["leaseReleased"] is True
    # the lease is gone: the rest of the old batch can no longer be acked with it
    assert ack(pg_conn, m3)[0]["error"] == "Invalid or expired lease"
    again = pop(pg_conn, "mid", batch=5)
    assert data(again) == [2, 3]
    assert [m["retryCount"] for m in again["messages"]] == [1, 0]


def test_batch_nack_counts_one_retry_and_redelivers_whole_batch(pg_conn: Conn) -> None:
    configure(pg_conn, "nack", retryLimit=1)
    push(pg_conn, "nack", [1, 2, 3])
    res = pop(pg_conn, "nack", batch=3)
    out = ack(pg_conn, res["messages"], "failed", error="bad batch")
    assert [r["status"] for r in out] == ["failed_retry"] * 3
    assert all(r["success"] for r in out)
    assert [r["leaseReleased"] for r in out] == [True, False, False]
    res = pop(pg_conn, "nack", batch=3)
    assert data(res) == [1, 2, 3] and [m["retryCount"] for m in res["messages"]] == [1, 0, 0]
    # second batch failure: message 1 is exhausted -> DLQ, then 2 starts its own retries
    out = ack(pg_conn, res["messages"], "failed", error="bad batch")
    assert [r["status"] for r in out] == ["failed_dlq", "failed_retry", "failed_retry"]
    assert data(pop(pg_conn, "nack", batch=3)) == [2, 3]


def test_retry_status_releases_lease_only(pg_conn: Conn) -> None:
    push(pg_conn, "rs", [1, 2])
    res = pop(pg_conn, "rs", batch=2)
    out = ack(pg_conn, res["messages"][0], "retry")[0]
    assert out["success"] and out["status"] == "retry" and out["leaseReleased"]
    again = pop(pg_conn, "rs", batch=2)
    assert data(again) == [1, 2] and again["messages"][0]["retryCount"] == 0


def test_retry_delay(pg_conn: Conn) -> None:
    configure(pg_conn, "rd", retryDelay=60_000)
    push(pg_conn, "rd", ["x"])
    m = pop(pg_conn, "rd")["messages"][0]
    ack(pg_conn, m, "failed")
    assert pop(pg_conn, "rd")["messages"] == []
    assert pop(pg_conn, "rd", "Default")["messages"] == []
    sql(
        pg_conn, "UPDATE queen.partition_consumers SET retry_available_at = now() - interval '1 ms'"
    )
    again = pop(pg_conn, "rd")["messages"]
    assert [(m["data"], m["retryCount"]) for m in again] == [("x", 1)]


def test_ack_notifies_free_when_lease_released(pg_conn: Conn, migrated_dsn: str) -> None:
    push(pg_conn, "fr.ee", [1, 2], partition="P")
    res = pop(pg_conn, "fr.ee", batch=2, group="g")
    listener = listen(migrated_dsn)
    try:
        ack(pg_conn, res["messages"][0])
        assert notifications(listener, wait=0.3) == []
        ack(pg_conn, res["messages"][1])
        assert notifications(listener) == [
            {
                "kind": "free",
                "queue": "fr.ee",
                "partition": "P",
                "consumerGroup": "g",
                "namespace": "fr",
                "task": "ee",
            }
        ]
    finally:
        listener.close()


# --------------------------------------------------------------------------- transactions


def test_transaction_commits_acks_and_pushes_together(pg_conn: Conn) -> None:
    push(pg_conn, "tx-in", ["work"])
    m = pop(pg_conn, "tx-in")["messages"][0]
    res = call(
        pg_conn,
        "execute_transaction_v2",
        {
            "operations": [
                {
                    "type": "ack",
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "status": "completed",
                },
                {
                    "type": "push",
                    "items": [
                        {"queue": "tx-out", "payload": {"r": 1}, "transactionId": "o1"},
                        {"queue": "tx-out", "payload": 2, "transactionId": "o2"},
                    ],
                },
            ]
        },
    )
    assert res["success"] is True and res["error"] is None
    assert [(r["index"], r["type"], r["success"]) for r in res["results"]] == [
        (0, "ack", True),
        (1, "push", True),
        (1, "push", True),
    ]
    assert res["results"][1]["transactionId"] == "o1" and res["results"][1]["queueName"] == "tx-out"
    assert res["results"][1]["messageId"] and res["results"][1]["partitionId"]
    assert res["results"][0]["dlq"] is False
    assert data(pop(pg_conn, "tx-out", batch=5)) == [{"r": 1}, 2]
    row = consumer_row(pg_conn, m["partitionId"])
    assert row["lease_id"] is None and row["last_consumed_id"] == int(m["id"])


def test_transaction_rolls_back_everything_on_failure(pg_conn: Conn) -> None:
    push(pg_conn, "tx-a", ["work"])
    m = pop(pg_conn, "tx-a")["messages"][0]
    before = consumer_row(pg_conn, m["partitionId"])
    good_ack = {
        "type": "ack",
        "transactionId": m["transactionId"],
        "partitionId": m["partitionId"],
        "status": "completed",
    }
    good_push = {"type": "push", "items": [{"queue": "tx-b", "payload": 1, "transactionId": "b1"}]}
    for bad, reason in (
        (
            {
                "type": "ack",
                "transactionId": "missing",
                "partitionId": m["partitionId"],
                "status": "completed",
            },
            "Unresolvable transaction",
        ),
        ({"type": "frobnicate"}, "unknown operation type"),
        (
            {
                "type": "ack",
                "transactionId": m["transactionId"],
                "partitionId": m["partitionId"],
                "status": "bogus",
            },
            "Unknown ack status",
        ),
    ):
        res = call(pg_conn, "execute_transaction_v2", {"operations": [good_push, good_ack, bad]})
        assert res["success"] is False and reason in res["error"], res
        assert res["results"][-1]["success"] is False
        assert sql(pg_conn, "SELECT count(*) FROM queen.queues WHERE name = 'tx-b'") == [(0,)]
        assert consumer_row(pg_conn, m["partitionId"]) == before
    # capacity failure of a push also rolls back
    configure(pg_conn, "tx-full", maxSize=1)
    push(pg_conn, "tx-full", [1])
    res = call(
        pg_conn,
        "execute_transaction_v2",
        {
            "operations": [
                good_ack,
                {
                    "type": "push",
                    "items": [{"queue": "tx-full", "payload": 2, "transactionId": "f2"}],
                },
            ]
        },
    )
    assert res["success"] is False and "maximum size" in res["error"]
    assert consumer_row(pg_conn, m["partitionId"]) == before
    for payload in ({"operations": []}, {}, {"operations": "x"}):
        res = call(pg_conn, "execute_transaction_v2", payload)
        assert res["success"] is False and "operations" in res["error"]


def test_transaction_failed_ack_goes_straight_to_dlq(pg_conn: Conn) -> None:
    configure(pg_conn, "tx-dlq", retryLimit=5)
    push(pg_conn, "tx-dlq", ["bad", "good"])
    m = pop(pg_conn, "tx-dlq")["messages"][0]
    res = call(
        pg_conn,
        "execute_transaction_v2",
        {
            "operations": [
                {
                    "type": "ack",
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "status": "failed",
                    "error": "nope",
                }
            ]
        },
    )
    assert res["success"] is True and res["results"][0]["dlq"] is True
    assert sql(pg_conn, "SELECT error_message FROM queen.dead_letter_queue") == [("nope",)]
    assert data(pop(pg_conn, "tx-dlq")) == ["good"]


# --------------------------------------------------------------------------- renew


def test_renew_lease(pg_conn: Conn) -> None:
    configure(pg_conn, "rn", leaseTime=10)
    push(pg_conn, "rn", [1])
    res = pop(pg_conn, "rn")
    lease = res["leaseId"]
    out = call(pg_conn, "renew_lease_v2", {"leaseId": lease, "seconds": 1000})
    assert out["success"] is True and out["leaseId"] == lease and out["error"] is None
    assert out["newExpiresAt"] == out["expiresAt"] and out["expiresAt"].endswith("Z")
    assert len(out["expiresAt"]) == len("2025-01-01T00:00:00.000Z")
    (secs,) = sql(
        pg_conn,
        "SELECT extract(epoch FROM lease_expires_at - now()) FROM queen.partition_consumers",
    )[0]
    assert 990 < secs <= 1000
    # never shortens; null seconds -> the queue's lease time
    out2 = call(pg_conn, "renew_lease_v2", {"leaseId": lease, "seconds": None})
    assert out2["success"] is True and out2["expiresAt"] == out["expiresAt"]
    sql(
        pg_conn,
        "UPDATE queen.partition_consumers SET lease_expires_at = now() + interval '1 second'",
    )
    call(pg_conn, "renew_lease_v2", {"leaseId": lease})
    (secs,) = sql(
        pg_conn,
        "SELECT extract(epoch FROM lease_expires_at - now()) FROM queen.partition_consumers",
    )[0]
    assert 9 < secs <= 10
    for bad in (str(uuid.uuid4()), "garbage"):
        out = call(pg_conn, "renew_lease_v2", {"leaseId": bad})
        assert out["success"] is False and out["error"] == "Lease not found or expired"
    sql(
        pg_conn,
        "UPDATE queen.partition_consumers SET lease_expires_at = now() - interval '1 second'",
    )
    assert call(pg_conn, "renew_lease_v2", {"leaseId": lease})["success"] is False


def test_renew_lease_v3_counts_and_tells_a_freed_lease_from_an_unknown_one(
    pg_conn: Conn,
) -> None:
    configure(pg_conn, "rn3", leaseTime=10)
    push(pg_conn, "rn3", [1], partition="a")
    push(pg_conn, "rn3", [2], partition="b")
    res = pop(pg_conn, "rn3", batch=2, partitions=2)
    lease = res["leaseId"]
    live = call(pg_conn, "renew_lease_v3", {"leaseId": lease})
    assert live["success"] is True and live["renewed"] == 2 and live["known"] is True
    ack(pg_conn, res["messages"])  # frees the lease on both partitions
    gone = call(pg_conn, "renew_lease_v3", {"leaseId": lease})
    assert gone["success"] is False and gone["renewed"] == 0 and gone["newExpiresAt"] is None
    assert gone["known"] is True, "a lease the server freed is remembered"
    unknown = call(pg_conn, "renew_lease_v3", {"leaseId": str(uuid.uuid4())})
    assert unknown["success"] is False and unknown["renewed"] == 0
    assert unknown["known"] is False
    assert call(pg_conn, "renew_lease_v3", {"leaseId": "garbage"})["known"] is False


# --------------------------------------------------------------------------- cascade


def test_deleting_a_queue_cascades_to_everything(pg_conn: Conn) -> None:
    configure(pg_conn, "gone", retryLimit=0)
    push(pg_conn, "gone", [1, 2], partition="p")
    push(pg_conn, "kept", [1])
    res = pop(pg_conn, "gone", batch=2, group="g", subscriptionMode="new")
    push(pg_conn, "gone", [3], partition="p")
    res = pop(pg_conn, "gone", batch=2, group="g")
    ack(pg_conn, res["messages"], "failed")
    msg_id = int(res["messages"][0]["id"])
    sql(
        pg_conn,
        """WITH t AS (INSERT INTO queen.message_traces
                             (message_id, partition_id, transaction_id, data)
                      SELECT id, partition_id, transaction_id, '{}'
                        FROM queen.messages WHERE id = %s
                      RETURNING id)
           INSERT INTO queen.message_trace_names (trace_id, trace_name) SELECT id, 'n' FROM t""",
        msg_id,
    )
    pop(pg_conn, "kept", group="g")
    sql(pg_conn, "DELETE FROM queen.queues WHERE name = 'gone'")
    for table in (
        "partitions",
        "messages",
        "partition_consumers",
        "dead_letter_queue",
        "partition_lookup",
        "message_traces",
        "message_trace_names",
        "consumer_groups_metadata",
    ):
        rows = sql(pg_conn, f"SELECT count(*) FROM queen.{table}")
        expected = {
            "partitions": 1,
            "messages": 1,
            "partition_consumers": 1,
            "partition_lookup": 1,
            "consumer_groups_metadata": 1,
        }
        assert rows == [(expected.get(table, 0),)], table


def test_partition_lookup_tracks_newest_message(pg_conn: Conn) -> None:
    push(pg_conn, "lk", [1, 2, 3], partition="a")
    push(pg_conn, "lk", [4], partition="b")
    rows = sql(
        pg_conn,
        """SELECT p.name,
                  pl.last_message_id
                  = (SELECT max(id) FROM queen.messages m WHERE m.partition_id = p.id)
             FROM queen.partition_lookup pl
             JOIN queen.partitions p ON p.id = pl.partition_id ORDER BY 1""",
    )
    assert rows == [("a", True), ("b", True)]


def test_hot_statements_use_the_order_index_with_generic_plans(pg_conn: Conn) -> None:
    """Pops read from the cursor through (partition_id, created_at, id), never sort a backlog."""
    for chunk in range(10):
        push(pg_conn, "plan", [{"i": chunk * 2000 + i} for i in range(2000)])
    for p in range(50):
        push(pg_conn, "plan", [1, 2], partition=f"p{p}")
    sql(pg_conn, "ANALYZE")
    sql(pg_conn, "SET plan_cache_mode = force_generic_plan")
    sql(
        pg_conn,
        """PREPARE fetch_batch(uuid, timestamptz, bigint, timestamptz, int) AS
           SELECT id FROM queen.messages
            WHERE partition_id = $1 AND (created_at, id) > ($2, $3) AND created_at <= $4
            ORDER BY created_at, id LIMIT $5""",
    )
    pid = sql(pg_conn, "SELECT id FROM queen.partitions WHERE name = 'Default'")[0][0]
    plan = "\n".join(
        r[0]
        for r in sql(
            pg_conn,
            "EXPLAIN EXECUTE fetch_batch(%s, '-infinity', 0, 'infinity', 10)",
            pid,
        )
    )
    assert "messages_partition_order_idx" in plan and "Sort" not in plan, plan
    # and the function really pops in order from the middle of the backlog
    first = pop(pg_conn, "plan", "Default", batch=5000)
    ack(pg_conn, first["messages"])
    assert [m["data"]["i"] for m in pop(pg_conn, "plan", "Default", batch=3)["messages"]] == [
        5000,
        5001,
        5002,
    ]


def test_a_retried_push_to_a_full_queue_answers_duplicate(pg_conn: Conn) -> None:
    """Stored messages are not counted against a capped queue's room when they come again
    (a client retrying a push whose answer it lost): they are duplicates, not refused."""
    configure(pg_conn, "capdup", maxSize=2)
    items = [{"queue": "capdup", "payload": n, "transactionId": f"t{n}"} for n in (1, 2)]
    assert [r["status"] for r in call(pg_conn, "push_messages_v2", items)] == ["queued"] * 2
    again = call(pg_conn, "push_messages_v2", items)
    assert [r["status"] for r in again] == ["duplicate", "duplicate"]
    assert all("error" not in r for r in again)
