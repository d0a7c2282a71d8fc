"""Reads by offset (POST /api/v1/fetch) and partition discovery (POST
/api/v1/partitions/changed) against the real gunicorn -k gevent server on real PostgreSQL.

The server's retention runs every 300 ms, so a queue with retentionSeconds = 3 loses its old
messages while a test waits for it (awaited as a condition, never slept for).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg2
import pytest

from tests.support.server import ServerProcess

ENCRYPTION_KEY = "cd" * 32


@pytest.fixture(scope="module")
def srv(module_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(
        module_dsn, workers=2, RETENTION_INTERVAL="300", QUEEN_ENCRYPTION_KEY=ENCRYPTION_KEY
    ) as server:
        yield server


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def post(url: str, path: str, body: Any, expect: int = 200) -> Any:
    r = httpx.post(f"{url}/api/v1{path}", json=body, timeout=30)
    assert r.status_code == expect, r.text
    return r.json()


def push(url: str, queue: str, partition: str, payloads: list[Any], txn: str = "") -> Any:
    items = [
        {"queue": queue, "partition": partition, "payload": p,
         **({"transactionId": f"{txn}{i}"} if txn else {})}
        for i, p in enumerate(payloads)
    ]  # fmt: skip
    return post(url, "/push", {"items": items}, 201)


def fetch(url: str, queue: str, partition: str, offset: int = 0, **extra: Any) -> Any:
    entry = {"queue": queue, "partition": partition, "offset": offset, **extra}
    return post(url, "/fetch", {"entries": [entry]})["entries"][0]


def changed(url: str, queue: str, **entry: Any) -> Any:
    return post(url, "/partitions/changed", {"entries": [{"queue": queue, **entry}]})


def test_concurrent_pushes_get_dense_offsets_in_commit_order(srv: ServerProcess) -> None:
    q = name("reads-dense")
    errors: list[BaseException] = []

    def producer(k: int) -> None:
        try:
            for n in range(5):
                push(srv.url, q, "p", [{"k": k, "n": n, "i": i} for i in range(3)])
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    entry = fetch(srv.url, q, "p")
    records = entry["records"]
    assert [r["offset"] for r in records] == list(range(120))
    assert (entry["highWatermark"], entry["logStartOffset"], entry.get("error")) == (120, 0, None)
    # Offset order is the order a consumer receives them: the partition's push order.
    popped = httpx.get(f"{srv.url}/api/v1/pop/queue/{q}/partition/p?batch=200&wait=false",
                       timeout=30).json()["messages"]  # fmt: skip
    assert [m["data"] for m in popped] == [r["payload"] for r in records]
    # Each producer's items keep their order within the partition.
    for k in range(8):
        mine = [(r["payload"]["n"], r["payload"]["i"]) for r in records if r["payload"]["k"] == k]
        assert mine == sorted(mine)


def test_duplicates_and_transactions_keep_offsets_dense(srv: ServerProcess) -> None:
    q = name("reads-dup")
    push(srv.url, q, "p", ["a", "b"], txn="t")
    # t0 is stored already: only the new item takes an offset (the general path gives the
    # reserved one back).
    results = push(srv.url, q, "p", ["dup", "c"], txn="t")
    assert [r["status"] for r in results] == ["duplicate", "duplicate"]
    push(srv.url, q, "p", ["c"], txn="u")
    body = {"operations": [{"type": "push", "items": [
        {"queue": q, "partition": "p", "payload": "d"},
        {"queue": q, "partition": "p", "payload": "e"},
    ]}]}  # fmt: skip
    assert post(srv.url, "/transaction", body)["success"]
    entry = fetch(srv.url, q, "p")
    assert [(r["offset"], r["payload"]) for r in entry["records"]] == [
        (0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "e"),
    ]  # fmt: skip
    assert entry["highWatermark"] == 5


def test_a_push_interleaving_partitions_numbers_each_in_order(srv: ServerProcess) -> None:
    """A partition's offsets in one push span its items' positions: contiguous items are
    numbered densely, interleaved ones keep their order with gaps, never a reuse."""
    q = name("reads-mixed")
    items = [{"queue": q, "partition": p, "payload": v}
             for p, v in (("p", "a"), ("q", "b"), ("p", "c"), ("q", "d"), ("q", "e"))]  # fmt: skip
    post(srv.url, "/push", {"items": items}, 201)
    push(srv.url, q, "p", ["f"])
    p_entry, q_entry = (fetch(srv.url, q, part) for part in ("p", "q"))
    assert [(r["offset"], r["payload"]) for r in p_entry["records"]] == [
        (0, "a"),
        (2, "c"),
        (3, "f"),
    ]
    assert p_entry["highWatermark"] == 4
    assert [(r["offset"], r["payload"]) for r in q_entry["records"]] == [
        (0, "b"),
        (2, "d"),
        (3, "e"),
    ]
    assert q_entry["highWatermark"] == 4
    listed = changed(srv.url, q)["entries"][0]["partitions"]
    assert {p["name"]: p["lastOffset"] for p in listed} == {"p": 3, "q": 3}


def test_a_deleted_message_leaves_a_gap_and_its_offset_is_never_given_again(
    srv: ServerProcess,
) -> None:
    q = name("reads-gap")
    results = push(srv.url, q, "p", ["a", "b", "c"], txn="g")
    pid = results[1]["partition_id"]
    r = httpx.delete(f"{srv.url}/api/v1/messages/{pid}/g1", timeout=15)
    assert r.status_code == 200, r.text
    push(srv.url, q, "p", ["d"], txn="h")
    entry = fetch(srv.url, q, "p")
    assert [(r["offset"], r["payload"]) for r in entry["records"]] == [(0, "a"), (2, "c"), (3, "d")]
    assert fetch(srv.url, q, "p", offset=1)["records"][0]["offset"] == 2


def test_reads_after_retention_start_at_the_oldest_kept_record(srv: ServerProcess) -> None:
    q = name("reads-retention")
    post(srv.url, "/configure",
         {"queue": q, "options": {"retentionEnabled": True, "retentionSeconds": 3}})  # fmt: skip
    push(srv.url, q, "p", ["old-0", "old-1"])
    deadline = time.monotonic() + 20
    while fetch(srv.url, q, "p")["logStartOffset"] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)  # retention runs every 300 ms in the server: poll its effect
    push(srv.url, q, "p", ["new-2"])
    below = fetch(srv.url, q, "p", offset=0)
    assert below["error"] == "OFFSET_OUT_OF_RANGE"
    assert (below["records"], below["logStartOffset"], below["highWatermark"]) == ([], 2, 3)
    # A reader restarts from logStartOffset (as the 2.6.0 client's fetch does).
    kept = fetch(srv.url, q, "p", offset=below["logStartOffset"])
    assert [(r["offset"], r["payload"]) for r in kept["records"]] == [(2, "new-2")]
    above = fetch(srv.url, q, "p", offset=4)
    assert (above["error"], above["records"]) == ("OFFSET_OUT_OF_RANGE", [])
    assert fetch(srv.url, q, "p", offset=3) == {
        "queue": q, "partition": "p", "highWatermark": 3, "logStartOffset": 2,
        "records": [], "error": None,
    }  # fmt: skip


def test_byte_budgets_bound_an_answer_but_the_first_record_always_goes(srv: ServerProcess) -> None:
    q = name("reads-bytes")
    push(srv.url, q, "a", ["x" * 100] * 3)
    push(srv.url, q, "b", ["y" * 100] * 3)
    small = fetch(srv.url, q, "a", maxBytes=250)
    assert [r["offset"] for r in small["records"]] == [0, 1]
    tiny = fetch(srv.url, q, "a", maxBytes=1)
    assert [r["offset"] for r in tiny["records"]] == [0]
    body = {"maxBytes": 250, "entries": [
        {"queue": q, "partition": "a", "offset": 0}, {"queue": q, "partition": "b", "offset": 0},
    ]}  # fmt: skip
    a, b = post(srv.url, "/fetch", body)["entries"]
    assert [r["offset"] for r in a["records"]] == [0, 1]
    assert (b["records"], b["highWatermark"]) == ([], 3)


def test_records_of_encrypted_queues_are_decrypted(srv: ServerProcess) -> None:
    q = name("reads-encrypted")
    post(srv.url, "/configure", {"queue": q, "options": {"encryptionEnabled": True}})
    push(srv.url, q, "p", [{"secret": 1}, "two"])
    assert [r["payload"] for r in fetch(srv.url, q, "p")["records"]] == [{"secret": 1}, "two"]
    conn = psycopg2.connect(srv.env["DATABASE_URL"])
    try:
        with conn.cursor() as cur:  # stored encrypted: the route opened them
            cur.execute(
                "SELECT bool_and(m.is_encrypted AND m.payload ? 'encrypted') FROM queen.messages m"
                " JOIN queen.partitions p ON p.id = m.partition_id"
                " JOIN queen.queues qq ON qq.id = p.queue_id WHERE qq.name = %s",
                (q,),
            )
            assert cur.fetchone() == (True,)
    finally:
        conn.close()


def test_unknown_queues_and_partitions_answer_no_records(srv: ServerProcess) -> None:
    q = name("reads-unknown")
    push(srv.url, q, "p", [1])
    for queue, partition in ((q, "other"), (name("reads-none"), "p")):
        entry = fetch(srv.url, queue, partition)
        assert entry == {
            "queue": queue, "partition": partition, "highWatermark": 0, "logStartOffset": 0,
            "records": [], "error": "UNKNOWN_TOPIC_OR_PARTITION",
        }  # fmt: skip


def test_reads_take_no_lease_and_move_no_cursor(srv: ServerProcess) -> None:
    q = name("reads-nolease")
    push(srv.url, q, "p", [1, 2])
    first = fetch(srv.url, q, "p")
    assert fetch(srv.url, q, "p") == first
    got = httpx.get(f"{srv.url}/api/v1/pop/queue/{q}?batch=10&wait=false", timeout=15)
    assert [m["data"] for m in got.json()["messages"]] == [1, 2]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "Request body must be a JSON object"),
        ({}, "entries must be a non-empty array"),
        ({"entries": []}, "entries must be a non-empty array"),
        ({"entries": [{"queue": "q", "partition": "p"}] * 1025}, "at most 1024"),
        ({"entries": ["q"]}, "entries[0] must be an object"),
        ({"entries": [{"partition": "p"}]}, "entries[0].queue must be a string"),
        ({"entries": [{"queue": "q"}]}, "entries[0].partition must be a string"),
        ({"entries": [{"queue": "q", "partition": "p", "offset": -1}]}, "entries[0].offset"),
        ({"entries": [{"queue": "q", "partition": "p", "offset": "0"}]}, "entries[0].offset"),
        ({"entries": [{"queue": "q", "partition": "p", "offset": True}]}, "entries[0].offset"),
        ({"entries": [{"queue": "q", "partition": "p", "maxBytes": 0}]}, "maxBytes"),
        ({"entries": [{"queue": "q", "partition": "p"}], "maxBytes": "big"}, "maxBytes"),
        ({"entries": [{"queue": "a b", "partition": "p"}]}, "Invalid entries[0].queue name"),
    ],
)
def test_fetch_refuses_bad_input(srv: ServerProcess, body: Any, message: str) -> None:
    answer = post(srv.url, "/fetch", body, 400)
    assert message in answer["error"]


def test_unknown_fields_are_ignored(srv: ServerProcess) -> None:
    q = name("reads-extra")
    push(srv.url, q, "p", ["a"])
    body = {"entries": [{"queue": q, "partition": "p", "offset": 0, "isolation": "x"}], "hint": 1}
    assert [r["payload"] for r in post(srv.url, "/fetch", body)["entries"][0]["records"]] == ["a"]


def test_changed_lists_written_partitions_in_pages(srv: ServerProcess) -> None:
    q = name("reads-changed")
    for p in ("a", "b", "c"):
        push(srv.url, q, p, [p])
    page = changed(srv.url, q, limit=2)
    first = page["entries"][0]
    assert [p["name"] for p in first["partitions"]] == ["a", "b"]
    assert isinstance(first["next"], str)
    rest = changed(srv.url, q, limit=2, after=first["next"])["entries"][0]
    assert ([p["name"] for p in rest["partitions"]], rest["next"]) == (["c"], None)
    a = first["partitions"][0]
    assert (a["lastOffset"], a["logStart"]) == (0, 0)
    assert a["lastWriteAt"] <= page["safeTime"]
    # From the safeTime on, only what was written after it.
    push(srv.url, q, "b", ["again"])
    later = changed(srv.url, q, since=page["safeTime"])["entries"][0]["partitions"]
    assert [(p["name"], p["lastOffset"]) for p in later] == [("b", 1)]
    missing = changed(srv.url, name("reads-nothing"))["entries"][0]
    assert (missing["error"], missing["partitions"]) == ("UNKNOWN_TOPIC_OR_PARTITION", [])


def test_a_commit_in_flight_never_falls_behind_safe_time(srv: ServerProcess) -> None:
    """A push that has stamped its partition but not committed when the discovery runs:
    the safeTime of that answer is at or before the push's stamp, so a discovery from that
    safeTime lists the partition once the push commits."""
    q = name("reads-inflight")
    push(srv.url, q, "p", ["before"])
    conn = psycopg2.connect(srv.env["DATABASE_URL"])
    try:
        with conn.cursor() as cur:  # a transaction left open: the commit in flight
            items = [{"queue": q, "partition": "p", "payload": "in-flight"}]
            cur.execute("SELECT queen.push_messages_v2(%s::jsonb)", (json.dumps(items),))
            time.sleep(0.05)  # the push's stamp is now older than the discovery's clock
            answer = changed(srv.url, q)
            safe = answer["safeTime"]
            listed = answer["entries"][0]["partitions"]
            assert [p["lastOffset"] for p in listed] == [0]  # the open push is not visible
            assert listed[0]["lastWriteAt"] < safe
        conn.commit()
    finally:
        conn.close()
    after = changed(srv.url, q, since=safe)["entries"][0]["partitions"]
    assert [(p["name"], p["lastOffset"]) for p in after] == [("p", 1)]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({}, "entries[0].queue must be a string"),
        ({"queue": "q", "since": "yesterday"}, "entries[0].since must be an ISO-8601"),
        ({"queue": "q", "since": 5}, "entries[0].since must be an ISO-8601"),
        ({"queue": "q", "after": "abc"}, "entries[0].after must be the `next`"),
        ({"queue": "q", "limit": 0}, "entries[0].limit"),
        ({"queue": "q", "limit": 1001}, "at most 1000"),
    ],
)
def test_changed_refuses_bad_input(srv: ServerProcess, entry: Any, message: str) -> None:
    answer = post(srv.url, "/partitions/changed", {"entries": [entry]}, 400)
    assert message in answer["error"]
