"""Push on a Citus cluster through the real server (gunicorn against the coordinator): every
push shape stores what it answered, on the worker that holds the partition (read there,
from the shard), a push to one known partition runs on that worker in one round trip
(`queen.push_partition_v3`, delegated), and a push over several workers commits or fails
as a whole (Citus's two-phase commit)."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg2
import psycopg2.extensions
import pytest

from tests.support.citus import NODES, CitusCluster
from tests.support.server import ServerProcess

KEY = bytes(range(32)).hex()
WORKER_IDS = 1 << 48  # a sequence on a worker draws from (its group id << 48) on


@pytest.fixture(scope="module")
def server(citus_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(citus_dsn, workers=1, QUEEN_ENCRYPTION_KEY=KEY) as srv:
        yield srv


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def _name() -> str:
    return f"cp_{uuid.uuid4().hex[:8]}"


def _push(http: httpx.Client, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = http.post("/api/v1/push", json={"items": items})
    assert r.status_code == 201, r.text
    results: list[dict[str, Any]] = r.json()
    return results


def _configure(http: httpx.Client, queue: str, **options: Any) -> None:
    r = http.post("/api/v1/configure", json={"queue": queue, "options": options})
    assert r.status_code == 200, r.text


def _sql(dsn: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(query, params)
            return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def _worker_dsn(citus_dsn: str, port: int) -> str:
    return re.sub(r":\d+/", f":{port}/", citus_dsn, count=1)


def _holder(citus_dsn: str, table: str, pid: str) -> tuple[int, int, str]:
    """(worker port, its group id, the shard's table name) of `table`'s shard for `pid`."""
    rows = _sql(
        citus_dsn,
        "SELECT s.nodeport, n.groupid, s.shard_name::text FROM citus_shards s"
        " JOIN pg_dist_node n ON n.nodeport = s.nodeport"
        " WHERE s.shardid = get_shard_id_for_distribution_column(%s, %s)",
        (table, pid),
    )
    assert len(rows) == 1
    return rows[0]


def _stored_on_worker(citus_dsn: str, pid: str) -> list[tuple[Any, ...]]:
    """(id, transaction_id, payload, partition_offset, is_encrypted) of the partition's
    messages, read on the worker that holds it, from the shard table itself."""
    port, _, shard = _holder(citus_dsn, "queen.messages", pid)
    return _sql(
        _worker_dsn(citus_dsn, port),
        f"SELECT id, transaction_id, payload, partition_offset, is_encrypted FROM {shard}"
        " WHERE partition_id = %s ORDER BY partition_offset",
        (pid,),
    )


def _counters_on_worker(citus_dsn: str, pid: str) -> int | None:
    port, _, shard = _holder(citus_dsn, "queen.partition_counters", pid)
    rows = _sql(
        _worker_dsn(citus_dsn, port),
        f"SELECT next_offset FROM {shard} WHERE partition_id = %s",
        (pid,),
    )
    return int(rows[0][0]) if rows else None


def test_single_pushes_are_stored_on_the_worker_that_holds_the_partition(
    citus_dsn: str, http: httpx.Client
) -> None:
    q = _name()
    first = _push(http, [{"queue": q, "payload": {"n": 0}, "transactionId": "a"}])
    assert first[0]["status"] == "queued"
    pid = first[0]["partition_id"]
    # the next ones go to the known partition: queen.push_partition_v3 on its worker
    later = [_push(http, [{"queue": q, "payload": {"n": n}}])[0] for n in (1, 2)]
    assert [r["status"] for r in later] == ["queued", "queued"]
    assert {r["partition_id"] for r in later} == {pid}

    stored = _stored_on_worker(citus_dsn, pid)
    assert [(r[2], r[3]) for r in stored] == [({"n": 0}, 0), ({"n": 1}, 1), ({"n": 2}, 2)]
    assert [str(r[0]) for r in stored] == [first[0]["message_id"]] + [
        r["message_id"] for r in later
    ]
    assert _counters_on_worker(citus_dsn, pid) == 3
    # The delegated pushes drew their ids on the holder (a worker's sequence range), not
    # on the coordinator: they ran there.
    _, group, _ = _holder(citus_dsn, "queen.messages", pid)
    assert group > 0
    assert [int(r["message_id"]) // WORKER_IDS for r in later] == [group, group]


def test_a_batch_over_many_queues_and_partitions_lands_on_both_workers(
    citus_cluster: CitusCluster, citus_dsn: str, http: httpx.Client
) -> None:
    queues = [_name() for _ in range(3)]
    items = [
        {"queue": q, "partition": f"p{n % 8}", "payload": {"q": i, "n": n}}
        for n in range(40)
        for i, q in enumerate(queues)
    ]
    results = _push(http, items)
    assert [r["status"] for r in results] == ["queued"] * len(items)
    by_pid: dict[str, list[dict[str, Any]]] = {}
    for item, result in zip(items, results, strict=True):
        assert result["queueName"] == item["queue"]
        by_pid.setdefault(result["partition_id"], []).append(item)
    assert len(by_pid) == 24
    ports = set()
    for pid, mine in by_pid.items():
        stored = _stored_on_worker(citus_dsn, pid)
        assert [r[2] for r in stored] == [i["payload"] for i in mine]  # input order
        # offsets in input order, below the partition's next one (the fast path reserves
        # the span of a partition's items in the request: interleaved ones leave gaps)
        offsets = [r[3] for r in stored]
        assert offsets == sorted(set(offsets)) and offsets[0] == 0
        assert _counters_on_worker(citus_dsn, pid) == offsets[-1] + 1
        ports.add(_holder(citus_dsn, "queen.messages", pid)[0])
    assert ports == {citus_cluster.ports[n] for n in NODES[1:]}


def test_transaction_ids_are_deduplicated_on_every_path(citus_dsn: str, http: httpx.Client) -> None:
    q, other = _name(), _name()
    first = _push(http, [{"queue": q, "payload": 1, "transactionId": "t1"}])[0]
    # again, now by the delegated one-partition push (the server knows the partition)
    again = _push(http, [{"queue": q, "payload": 2, "transactionId": "t1"}])[0]
    assert (again["status"], again["message_id"]) == ("duplicate", first["message_id"])
    # within a request, and across partitions and workers
    mixed = _push(
        http,
        [
            {"queue": q, "payload": 3, "transactionId": "t1"},
            {"queue": q, "payload": 4, "transactionId": "t2"},
            {"queue": q, "payload": 5, "transactionId": "t2"},
            {"queue": other, "partition": "x", "payload": 6, "transactionId": "t1"},
        ],
    )
    assert [r["status"] for r in mixed] == ["duplicate", "queued", "duplicate", "queued"]
    assert mixed[0]["message_id"] == first["message_id"]
    assert mixed[2]["message_id"] == mixed[1]["message_id"]
    stored = _stored_on_worker(citus_dsn, first["partition_id"])
    assert [(r[1], r[2], r[3]) for r in stored] == [("t1", 1, 0), ("t2", 4, 1)]
    assert _counters_on_worker(citus_dsn, first["partition_id"]) == 2  # offsets given back


def test_delayed_and_windowed_queues_store_their_pushes(citus_dsn: str, http: httpx.Client) -> None:
    delayed, windowed = _name(), _name()
    _configure(http, delayed, delayedProcessing=30)
    _configure(http, windowed, windowBuffer=20)
    for q in (delayed, windowed):
        results = [_push(http, [{"queue": q, "payload": n}])[0] for n in range(3)]
        assert [r["status"] for r in results] == ["queued"] * 3
        stored = _stored_on_worker(citus_dsn, results[0]["partition_id"])
        assert [(r[2], r[3]) for r in stored] == [(0, 0), (1, 1), (2, 2)]


def test_max_size_refuses_what_would_overfill_the_queue(citus_dsn: str, http: httpx.Client) -> None:
    q = _name()
    _configure(http, q, maxSize=3)
    ok = _push(http, [{"queue": q, "payload": n} for n in range(2)])
    assert [r["status"] for r in ok] == ["queued", "queued"]
    # the one-partition push declines a capped queue: the general push decides
    full = http.post("/api/v1/push", json={"items": [{"queue": q, "payload": n} for n in (2, 3)]})
    assert full.status_code == 201 and full.headers.get("Retry-After") == "5"
    assert [(r["status"], r.get("reason")) for r in full.json()] == [("failed", "queue_full")] * 2
    last = _push(http, [{"queue": q, "payload": 2}])
    assert last[0]["status"] == "queued"
    stored = _stored_on_worker(citus_dsn, ok[0]["partition_id"])
    assert [(r[2], r[3]) for r in stored] == [(0, 0), (1, 1), (2, 2)]


def test_an_encrypted_queue_stores_ciphertext_on_its_worker(
    citus_dsn: str, http: httpx.Client
) -> None:
    q = _name()
    _configure(http, q, encryptionEnabled=True)
    results = [_push(http, [{"queue": q, "payload": {"secret": n}}])[0] for n in range(2)]
    assert [r["status"] for r in results] == ["queued", "queued"]
    stored = _stored_on_worker(citus_dsn, results[0]["partition_id"])
    assert [r[4] for r in stored] == [True, True]
    assert all("secret" not in str(r[2]) for r in stored)
    # the second one was delegated to the holder, and took the fast path there
    _, group, _ = _holder(citus_dsn, "queen.messages", results[0]["partition_id"])
    assert int(results[1]["message_id"]) // WORKER_IDS == group


def test_concurrent_pushes_through_the_batcher_are_all_stored_in_order(
    server: ServerProcess, citus_dsn: str
) -> None:
    q = _name()
    errors: list[BaseException] = []
    answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def producer(k: int) -> None:
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client:
                for n in range(10):
                    items = [{"queue": q, "payload": {"k": k, "n": n, "i": i}} for i in range(3)]
                    got = _push(client, items)
                    with lock:
                        answers.extend(got)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(answers) == 180 and {a["status"] for a in answers} == {"queued"}
    pid = answers[0]["partition_id"]
    stored = _stored_on_worker(citus_dsn, pid)
    assert [r[3] for r in stored] == list(range(180))
    assert sorted(str(r[0]) for r in stored) == sorted(a["message_id"] for a in answers)
    # each producer's messages in the order it sent them
    for k in range(6):
        mine = [(r[2]["n"], r[2]["i"]) for r in stored if r[2]["k"] == k]
        assert mine == sorted(mine)
    assert _counters_on_worker(citus_dsn, pid) == 180


def _remote_commands(notices: list[str]) -> list[tuple[int, str]]:
    """(worker port, command) of what `citus.log_remote_commands` says was sent."""
    return [
        (int(m.group(2)), m.group(1))
        for m in re.finditer(
            r"issuing (.*?)\nDETAIL:\s+on server \S+@[\d.]+:(\d+)", "".join(notices), re.S
        )
    ]


def test_a_push_to_a_known_partition_is_one_delegated_call_on_its_worker(
    citus_dsn: str, http: httpx.Client
) -> None:
    """What the server sends for a push to a known partition (push_partition_delegated):
    the coordinator sends one command, the call itself, to the worker holding the
    partition, and the worker runs it all there: the message id is from that worker's
    range and no other node takes part (no two-phase commit)."""
    from queen_threads.db import queries

    q = _name()
    pid = _push(http, [{"queue": q, "payload": 0}])[0]["partition_id"]
    port, group, _ = _holder(citus_dsn, "queen.messages", pid)
    conn = psycopg2.connect(citus_dsn)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("SELECT count(*) FROM pg_dist_transaction")
    (prepared_before,) = cur.fetchone()  # type: ignore[misc]
    cur.execute("SET citus.log_remote_commands = on")
    cur.execute("SET client_min_messages = log")
    del conn.notices[:]
    items = json.dumps([{"queue": q, "payload": 1}, {"queue": q, "payload": 2}])
    cur.execute(queries.get("push_partition_delegated"), (pid, items))
    (text,) = cur.fetchone()  # type: ignore[misc]
    sent = _remote_commands(conn.notices)
    cur.execute("RESET citus.log_remote_commands")
    cur.execute("SELECT count(*) FROM pg_dist_transaction")
    (prepared_after,) = cur.fetchone()  # type: ignore[misc]
    conn.close()
    assert len(sent) == 1, sent
    assert sent[0][0] == port
    assert sent[0][1].startswith("SELECT queen.push_partition_v3_on_shard(")
    rows = json.loads(text)
    assert [r[0] for r in rows] == ["queued", "queued"]
    assert [int(r[1]) // WORKER_IDS for r in rows] == [group, group]
    assert prepared_after == prepared_before  # one node: no two-phase commit
    assert [r[3] for r in _stored_on_worker(citus_dsn, pid)] == [0, 1, 2]


def test_a_push_over_both_workers_commits_as_a_whole(
    citus_cluster: CitusCluster, citus_dsn: str, http: httpx.Client
) -> None:
    """A request whose items sit on both workers: when the insert fails on one worker,
    nothing of the request is stored on the other (two-phase commit), and the request
    fails; without the failure all of it is stored."""
    q = _name()
    seeded = _push(http, [{"queue": q, "partition": f"p{n}", "payload": "seed"} for n in range(16)])
    by_port: dict[int, tuple[str, str]] = {}
    for n, r in enumerate(seeded):
        by_port.setdefault(_holder(citus_dsn, "queen.messages", r["partition_id"])[0],
                           (f"p{n}", r["partition_id"]))  # fmt: skip
    assert set(by_port) == {citus_cluster.ports[n] for n in NODES[1:]}
    (_, (ok_name, ok_pid)), (bad_port, (bad_name, bad_pid)) = sorted(by_port.items())
    _, _, bad_shard = _holder(citus_dsn, "queen.messages", bad_pid)
    worker = _worker_dsn(citus_dsn, bad_port)
    # (a trigger on the shard itself, made on its worker: Citus leaves shards alone)
    _sql(
        worker,
        "SET citus.enable_ddl_propagation = off;"
        " CREATE FUNCTION public.cp_refuse() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN IF NEW.payload = '\"boom\"' THEN RAISE EXCEPTION 'refused on this worker';"
        " END IF; RETURN NEW; END $$;"
        " SET citus.enable_manual_changes_to_shards = on;"
        f" CREATE TRIGGER cp_refuse BEFORE INSERT ON {bad_shard}"
        " FOR EACH ROW EXECUTE FUNCTION public.cp_refuse()",
    )
    try:
        items = [
            {"queue": q, "partition": ok_name, "payload": "kept?"},
            {"queue": q, "partition": bad_name, "payload": "boom"},
        ]
        failed = http.post("/api/v1/push", json={"items": items})
        assert failed.status_code >= 500, failed.text
        assert [x[2] for x in _stored_on_worker(citus_dsn, ok_pid)] == ["seed"]
        assert [x[2] for x in _stored_on_worker(citus_dsn, bad_pid)] == ["seed"]
        assert _counters_on_worker(citus_dsn, ok_pid) == 1
        items[1]["payload"] = "fine"
        assert [x["status"] for x in _push(http, items)] == ["queued", "queued"]
        assert [x[2] for x in _stored_on_worker(citus_dsn, ok_pid)] == ["seed", "kept?"]
        assert [x[2] for x in _stored_on_worker(citus_dsn, bad_pid)] == ["seed", "fine"]
    finally:
        _sql(
            worker,
            "SET citus.enable_ddl_propagation = off;"
            " SET citus.enable_manual_changes_to_shards = on;"
            f" DROP TRIGGER IF EXISTS cp_refuse ON {bad_shard};"
            " DROP FUNCTION IF EXISTS public.cp_refuse()",
        )


def test_pushes_keep_the_cursor_rows_of_registered_groups_on_the_worker(
    citus_dsn: str, http: httpx.Client
) -> None:
    """Migration 0019's commit-time trigger, on the shard's worker: a partition's first
    message creates the cursor rows of the groups registered for its queue, and every push
    moves their head to its newest message (the coordinator's push and the delegated one)."""
    q = _name()
    _configure(http, q)
    _sql(
        citus_dsn,
        "INSERT INTO queen.queue_consumer_groups (queue_id, consumer_group)"
        " SELECT id, 'g1' FROM queen.queues WHERE name = %s",
        (q,),
    )
    results = [_push(http, [{"queue": q, "partition": "x", "payload": n}])[0] for n in range(3)]
    pid = results[0]["partition_id"]
    port, _, shard = _holder(citus_dsn, "queen.partition_consumers", pid)
    rows = _sql(
        _worker_dsn(citus_dsn, port),
        f"SELECT consumer_group, head_id, available_at IS NOT NULL FROM {shard}"
        " WHERE partition_id = %s",
        (pid,),
    )
    assert rows == [("g1", int(results[-1]["message_id"]), True)]


def test_a_session_citus_refused_a_statement_in_is_not_reused(
    citus_dsn: str, http: httpx.Client
) -> None:
    """Citus 13.2.2 can stop delegating function calls in a session after its planner
    refused a statement inside a function (0A000; the shape below, that of a claim by
    `FOR UPDATE SKIP LOCKED` over several shards): the pool closes such a connection, so
    the next push of a known partition is still delegated (its id from the holder's range)."""
    from queen_threads.db import Database, PoolConfig

    q = _name()
    pid = _push(http, [{"queue": q, "payload": 0}])[0]["partition_id"]
    _, group, _ = _holder(citus_dsn, "queen.messages", pid)
    _sql(
        citus_dsn,
        "CREATE FUNCTION public.cp_claim_all() RETURNS void LANGUAGE plpgsql AS $$"
        " DECLARE v bigint; r queen.timers[]; BEGIN v := queen._wake_epoch();"
        " BEGIN SELECT coalesce(array_agg(s.t), '{}') INTO r"
        " FROM (SELECT t FROM queen.timers t LIMIT 5 FOR UPDATE SKIP LOCKED) s;"
        " EXCEPTION WHEN lock_not_available THEN NULL; END; END $$",
    )
    db = Database(PoolConfig(citus_dsn, max_size=1, acquire_timeout_s=5))
    try:
        with (
            pytest.raises(Exception, match="FOR UPDATE"),
            db.connection() as conn,
            conn.cursor() as cur,
        ):
            cur.execute("SELECT public.cp_claim_all()")
        items = json.dumps([{"queue": q, "payload": 1}])
        text = db.value("push_partition_delegated", (pid, items))
        assert int(json.loads(text)[0][1]) // WORKER_IDS == group
    finally:
        db.close()
        _sql(citus_dsn, "DROP FUNCTION public.cp_claim_all()")


def test_a_push_through_the_coordinator_reaches_only_the_workers_of_its_partitions(
    citus_cluster: CitusCluster, citus_dsn: str, http: httpx.Client
) -> None:
    """The general entry point (push_messages: a first push, several partitions): every
    command the coordinator sends goes to a worker that holds one of the partitions."""
    from queen_threads.db import queries

    q = _name()
    seeded = _push(http, [{"queue": q, "partition": f"p{n}", "payload": 0} for n in range(16)])
    holders = {r["partition_id"]: _holder(citus_dsn, "queen.messages", r["partition_id"])[0]
               for r in seeded}  # fmt: skip
    one = next(iter(holders))
    name = {r["partition_id"]: f"p{n}" for n, r in enumerate(seeded)}
    conn = psycopg2.connect(citus_dsn)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("SET citus.log_remote_commands = on")
    cur.execute("SET client_min_messages = log")
    try:
        del conn.notices[:]
        items = [{"queue": q, "partition": name[one], "payload": 1}]
        cur.execute(queries.get("push_messages"), (json.dumps(items),))
        assert {port for port, _ in _remote_commands(conn.notices)} == {holders[one]}
        del conn.notices[:]
        items = [{"queue": q, "partition": name[p], "payload": 2} for p in holders]
        cur.execute(queries.get("push_messages"), (json.dumps(items),))
        assert {port for port, _ in _remote_commands(conn.notices)} == set(holders.values())
    finally:
        conn.close()
