"""Pop, ack, lease renewal and transactions on a Citus cluster, through the real server
(gunicorn against the coordinator): delivery exactly once over partitions on both
workers, in order per partition, never two consumers on one partition; retries that reach
the dead-letter queue; a transaction's ack and push on two workers committed or rolled
back as a whole; and a pop, an ack and a renewal of one partition each one delegated call
on the worker that holds the partition (queen.pop_partition_v1, ack_partition_v2,
renew_partition_v1 through their entry points on Citus, schema/citus/70_twins.sql); a pop of
a whole queue one call on a node at a time (queen.pop_queue_on_node_v1)."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import psycopg2
import psycopg2.extras
import pytest

from tests.support.citus import NODES, CitusCluster
from tests.support.server import ServerProcess


@pytest.fixture(scope="module")
def server(citus_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(citus_dsn, workers=1) as srv:
        yield srv


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def _name(prefix: str = "cc") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _sql(dsn: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(query, params)
            return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def _holder(dsn: str, pid: str) -> int:
    """The port of the worker that holds partition `pid`."""
    rows = _sql(
        dsn,
        "SELECT nodeport FROM citus_shards "
        "WHERE shardid = get_shard_id_for_distribution_column('queen.messages', %s)",
        (pid,),
    )
    return int(rows[0][0])


def _push(http: httpx.Client, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = http.post("/api/v1/push", json={"items": items})
    assert r.status_code == 201, r.text
    results: list[dict[str, Any]] = r.json()
    assert all(x["status"] == "queued" for x in results), results
    return results


def _pop(http: httpx.Client, path: str, **params: Any) -> dict[str, Any] | None:
    r = http.get(path, params=params)
    assert r.status_code in (200, 204), r.text
    return r.json() if r.status_code == 200 else None


def _acks(
    messages: list[dict[str, Any]], status: str = "completed", **extra: Any
) -> list[dict[str, Any]]:
    return [
        {
            "transactionId": m["transactionId"],
            "partitionId": m["partitionId"],
            "leaseId": m["leaseId"],
            "consumerGroup": m["consumerGroup"],
            "status": status,
            **extra,
        }
        for m in messages
    ]


def _holders(dsn: str, results: list[dict[str, Any]]) -> dict[str, int]:
    """partition id -> the worker port holding it, from push answers."""
    return {r["partition_id"]: _holder(dsn, r["partition_id"]) for r in results}


def _partition_name(dsn: str, pid: str) -> str:
    return str(_sql(dsn, "SELECT name FROM queen.partitions WHERE id = %s", (pid,))[0][0])


def test_exactly_once_in_order_over_partitions_on_both_workers(
    citus_cluster: CitusCluster, citus_dsn: str, server: ServerProcess, http: httpx.Client
) -> None:
    """4 consumers long-poll one queue of 16 partitions (queue mode, batch 5) and ack each
    batch with its lease: every message once, each partition's batches in order and never
    overlapping (no two consumers hold a partition at once)."""
    q = _name()
    parts, per_part = 16, 15
    pushed = _push(
        http,
        [
            {"queue": q, "partition": f"p{p}", "payload": {"p": p, "n": n}}
            for n in range(per_part)
            for p in range(parts)
        ],
    )
    workers = {citus_cluster.ports[n] for n in NODES[1:]}
    assert set(_holders(citus_dsn, pushed).values()) == workers  # odds of one worker: 2**-15

    lock = threading.Lock()
    delivered: list[tuple[int, int]] = []
    spans: dict[int, list[tuple[float, float, list[int]]]] = defaultdict(list)
    errors: list[BaseException] = []
    total = parts * per_part

    def consume() -> None:
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client:
                while True:
                    with lock:
                        if len(delivered) >= total:
                            return
                    got = _pop(client, f"/api/v1/pop/queue/{q}", batch=5, wait="true",
                               timeout=1000)  # fmt: skip
                    if got is None:
                        continue
                    start = time.monotonic()
                    msgs = got["messages"]
                    assert len({m["partitionId"] for m in msgs}) == 1
                    r = client.post("/api/v1/ack/batch", json={"acknowledgments": _acks(msgs)})
                    assert r.status_code == 200, r.text
                    assert all(x["success"] for x in r.json()), r.text
                    end = time.monotonic()
                    part = msgs[0]["data"]["p"]
                    with lock:
                        delivered.extend((m["data"]["p"], m["data"]["n"]) for m in msgs)
                        spans[part].append((start, end, [m["data"]["n"] for m in msgs]))
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert sorted(delivered) == sorted((p, n) for p in range(parts) for n in range(per_part))
    for part, batches in spans.items():
        ns = [n for _, _, b in batches for n in b]
        assert ns == list(range(per_part)), (part, ns)  # in order, batch after batch
    # no lease is left
    assert _sql(
        citus_dsn,
        "SELECT count(*) FROM queen.partition_consumers pc JOIN queen.partitions p "
        "ON p.id = pc.partition_id JOIN queen.queues qq ON qq.id = p.queue_id "
        "WHERE qq.name = %s AND pc.lease_id IS NOT NULL",
        (q,),
    ) == [(0,)]


def test_two_consumers_never_hold_one_partition(http: httpx.Client) -> None:
    q = _name()
    _push(http, [{"queue": q, "partition": "only", "payload": n} for n in range(4)])
    first = _pop(http, f"/api/v1/pop/queue/{q}", batch=2)
    assert first is not None and [m["data"] for m in first["messages"]] == [0, 1]
    # leased: neither a queue pop nor a pop of that partition gets it meanwhile
    assert _pop(http, f"/api/v1/pop/queue/{q}", batch=2) is None
    assert _pop(http, f"/api/v1/pop/queue/{q}/partition/only", batch=2) is None
    r = http.post("/api/v1/ack/batch", json={"acknowledgments": _acks(first["messages"])})
    assert r.status_code == 200 and all(x["success"] for x in r.json())
    nxt = _pop(http, f"/api/v1/pop/queue/{q}/partition/only", batch=5)
    assert nxt is not None and [m["data"] for m in nxt["messages"]] == [2, 3]


def test_groups_and_namespace_pops_each_get_every_message_once(http: httpx.Client) -> None:
    """Two consumer groups over a namespace of two queues (partitions on both workers):
    each group gets every message once, independently of the other."""
    ns = _name("ns")
    queues = [f"{ns}.a", f"{ns}.b"]
    _push(
        http,
        [{"queue": qn, "partition": f"p{p}", "payload": f"{qn}/{p}/{n}"}
         for qn in queues for p in range(3) for n in range(4)],
    )  # fmt: skip
    for group in ("g1", "g2"):
        seen: list[str] = []
        for _ in range(100):
            got = _pop(http, "/api/v1/pop", namespace=ns, consumerGroup=group, batch=4)
            if got is None:
                break
            seen.extend(m["data"] for m in got["messages"])
            r = http.post("/api/v1/ack/batch", json={"acknowledgments": _acks(got["messages"])})
            assert all(x["success"] for x in r.json()), r.text
        assert sorted(seen) == sorted(
            f"{qn}/{p}/{n}" for qn in queues for p in range(3) for n in range(4)
        ), group


def test_autopilot_takes_ready_partitions_on_both_workers(http: httpx.Client) -> None:
    q = _name()
    _push(http, [{"queue": q, "partition": f"p{p}", "payload": p} for p in range(6)])
    got = _pop(http, f"/api/v1/pop/queue/{q}", autopilot="true")
    assert got is not None
    assert sorted(m["data"] for m in got["messages"]) == list(range(6))
    assert got["partitionsClaimed"] == 6


def test_failed_acks_retry_then_reach_the_dlq(citus_dsn: str, http: httpx.Client) -> None:
    q = _name()
    r = http.post("/api/v1/configure", json={"queue": q, "options": {"retryLimit": 2}})
    assert r.status_code == 200, r.text
    pushed = _push(http, [{"queue": q, "partition": "p", "payload": "bad"}])
    pid = pushed[0]["partition_id"]
    statuses = []
    for _ in range(3):
        got = _pop(http, f"/api/v1/pop/queue/{q}/partition/p", batch=1)
        assert got is not None and got["messages"][0]["data"] == "bad"
        r = http.post("/api/v1/ack", json=_acks(got["messages"], "failed", error="boom")[0])
        assert r.status_code == 200, r.text
        answer = r.json()
        statuses.append((answer[0] if isinstance(answer, list) else answer)["status"])
    assert statuses == ["failed_retry", "failed_retry", "failed_dlq"]
    assert _pop(http, f"/api/v1/pop/queue/{q}/partition/p", batch=1) is None
    rows = _sql(
        citus_dsn,
        "SELECT retry_count, jsonb_array_length(attempts) FROM queen.dead_letter_queue "
        "WHERE partition_id = %s",
        (pid,),
    )
    assert rows == [(2, 3)]


def test_lease_renew_and_release(citus_dsn: str, http: httpx.Client) -> None:
    q = _name()
    _push(http, [{"queue": q, "partition": "p", "payload": n} for n in range(2)])
    got = _pop(http, f"/api/v1/pop/queue/{q}/partition/p", batch=1)
    assert got is not None
    r = http.post(f"/api/v1/lease/{got['leaseId']}/extend", json={"seconds": 120})
    assert r.status_code == 200, r.text
    assert r.json()["success"] is True
    (released,) = _sql(
        citus_dsn,
        "SELECT queen.release_leases_v1(%s::jsonb)",
        (psycopg2.extras.Json({"leaseIds": [got["leaseId"]]}),),
    )
    assert released == (1,)
    again = _pop(http, f"/api/v1/pop/queue/{q}/partition/p", batch=2)
    assert again is not None and [m["data"] for m in again["messages"]] == [0, 1]


def _on_two_workers(
    citus_dsn: str, http: httpx.Client, q: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two partitions of `q` on different workers: (push answer of each)."""
    pushed = _push(http, [{"queue": q, "partition": f"p{p}", "payload": p} for p in range(16)])
    by_worker: dict[int, dict[str, Any]] = {}
    for r in pushed:
        by_worker.setdefault(_holder(citus_dsn, r["partition_id"]), r)
    assert len(by_worker) == 2
    a, b = by_worker.values()
    return a, b


def test_a_transaction_over_two_workers_commits_or_rolls_back_as_a_whole(
    citus_dsn: str, http: httpx.Client
) -> None:
    q = _name()
    a, b = _on_two_workers(citus_dsn, http, q)
    a_part = _partition_name(citus_dsn, a["partition_id"])
    got = _pop(http, f"/api/v1/pop/queue/{q}/partition/{a_part}", batch=1)
    assert got is not None
    (msg,) = got["messages"]
    b_part = _partition_name(citus_dsn, b["partition_id"])

    # a lease that is not the message's: everything rolls back (the push on the other worker)
    bad = http.post("/api/v1/transaction", json={"operations": [
        {"type": "push", "items": [{"queue": q, "partition": b_part, "payload": "rolled back"}]},
        {**_acks([msg])[0], "type": "ack", "leaseId": str(uuid.uuid4())},
    ]})  # fmt: skip
    assert bad.status_code in (200, 400, 409), bad.text
    assert bad.json()["success"] is False
    stored = _sql(
        citus_dsn,
        "SELECT count(*) FROM queen.messages WHERE partition_id = %s AND payload = %s::jsonb",
        (b["partition_id"], '"rolled back"'),
    )
    assert stored == [(0,)]

    ok = http.post("/api/v1/transaction", json={"operations": [
        {**_acks([msg])[0], "type": "ack"},
        {"type": "push", "items": [{"queue": q, "partition": b_part, "payload": "committed"}]},
    ]})  # fmt: skip
    assert ok.status_code == 200, ok.text
    assert ok.json()["success"] is True, ok.text
    stored = _sql(
        citus_dsn,
        "SELECT count(*) FROM queen.messages WHERE partition_id = %s AND payload = %s::jsonb",
        (b["partition_id"], '"committed"'),
    )
    assert stored == [(1,)]
    # the ack counted: the partition's next pop starts after it
    assert _pop(http, f"/api/v1/pop/queue/{q}/partition/{a_part}", batch=1) is None


def _remote_calls(log_text: str, function: str) -> list[tuple[str, int]]:
    """(partition id, worker port) of each `issuing SELECT queen.<function>(...)` the
    coordinator logged (citus.log_remote_commands)."""
    pattern = re.compile(
        rf"issuing SELECT queen\.{function}\('([0-9a-f-]+)'::uuid.*?\n.*?on server \S+@[\d.]+:(\d+)"
    )
    return [(m.group(1), int(m.group(2))) for m in pattern.finditer(log_text)]


@contextlib.contextmanager
def _remote_command_log(cluster: CitusCluster, dsn: str) -> Iterator[Callable[[], str]]:
    """The commands the coordinator sends to the workers (citus.log_remote_commands) for
    the sessions that start inside the block: a function that reads what its log got."""
    dbname = dsn.rsplit("/", 1)[1].split("?")[0]
    coordinator = cluster.dsn("coordinator", dbname)
    log = cluster.folder / "coordinator.log"
    _sql(coordinator, f'ALTER DATABASE "{dbname}" SET citus.log_remote_commands = on')
    _sql(coordinator, f'ALTER DATABASE "{dbname}" SET log_min_messages = notice')
    offset = log.stat().st_size

    def read() -> str:
        with log.open(errors="replace") as f:
            f.seek(offset)
            return f.read()

    try:
        yield read
    finally:
        _sql(coordinator, f'ALTER DATABASE "{dbname}" RESET citus.log_remote_commands')
        _sql(coordinator, f'ALTER DATABASE "{dbname}" RESET log_min_messages')


def test_one_partition_operations_are_one_call_on_the_worker_that_holds_it(
    citus_cluster: CitusCluster, citus_dsn: str
) -> None:
    """Through the real server: the pop of a named partition, its ack and the renewal of
    its lease each reach the coordinator as one delegated call, sent to the holder."""
    with _remote_command_log(citus_cluster, citus_dsn) as logged:
        with (
            ServerProcess(citus_dsn, workers=1) as srv,
            httpx.Client(base_url=srv.url, timeout=30) as client,
        ):
            q = _name()
            pushed = _push(client, [{"queue": q, "partition": "p", "payload": n} for n in range(4)])
            pid = pushed[0]["partition_id"]
            holder = _holder(citus_dsn, pid)
            got = _pop(client, f"/api/v1/pop/queue/{q}/partition/p", batch=2)
            assert got is not None and [m["data"] for m in got["messages"]] == [0, 1]
            r = client.post(f"/api/v1/lease/{got['leaseId']}/extend", json={"seconds": 60})
            assert r.json()["success"] is True, r.text
            r = client.post("/api/v1/ack/batch", json={"acknowledgments": _acks(got["messages"])})
            assert all(x["success"] for x in r.json()), r.text
            got = _pop(client, f"/api/v1/pop/queue/{q}/partition/p", batch=2)
            assert got is not None and [m["data"] for m in got["messages"]] == [2, 3]
        text = logged()
    # the server knew the partition from the push's answer: every pop of it delegated
    assert _remote_calls(text, "pop_partition_v1_on_shard") == [(pid, holder), (pid, holder)]
    assert _remote_calls(text, "ack_partition_v2_on_shard") == [(pid, holder)]
    assert _remote_calls(text, "renew_partition_v1_on_shard") == [(pid, holder)]


def test_a_delegated_pop_and_ack_send_nothing_else_from_the_coordinator(
    citus_dsn: str, http: httpx.Client
) -> None:
    """The same calls made directly: the coordinator sends exactly one command each, to
    the holder (the function's statements run there, against its local shards)."""
    q = _name()
    pushed = _push(http, [{"queue": q, "partition": "p", "payload": n} for n in range(2)])
    pid = pushed[0]["partition_id"]
    holder = _holder(citus_dsn, pid)
    conn = psycopg2.connect(citus_dsn)
    conn.autocommit = True
    try:
        cur = conn.cursor()
        cur.execute("SET citus.log_remote_commands = on")
        cur.execute("SET client_min_messages = log")
        request = {"idx": 0, "queue": q, "partition": "p", "batch": 2, "consumerGroup": "direct"}
        del conn.notices[:]
        cur.execute(
            "SELECT queen.pop_partition_v1(%s::uuid, %s::jsonb)",
            (pid, psycopg2.extras.Json(request)),
        )
        popped = json.loads(cur.fetchone()[0])  # type: ignore[index]
        ports = {int(p) for p in re.findall(r"on server \S+@[\d.]+:(\d+)", "".join(conn.notices))}
        assert len([n for n in conn.notices if "issuing" in n]) == 1
        assert ports == {holder}
        del conn.notices[:]
        cur.execute(
            "SELECT queen.ack_partition_v2(%s::uuid, %s::text)",
            (pid, json.dumps({"acks": _acks(popped["messages"])})),
        )
        acked = json.loads(cur.fetchone()[0])  # type: ignore[index]
        assert all(x["success"] for x in acked["results"])
        ports = {int(p) for p in re.findall(r"on server \S+@[\d.]+:(\d+)", "".join(conn.notices))}
        assert len([n for n in conn.notices if "issuing" in n]) == 1
        assert ports == {holder}
    finally:
        conn.close()


def test_pops_of_a_queue_go_to_one_node_after_the_other_without_reading_every_shard(
    citus_cluster: CitusCluster, citus_dsn: str
) -> None:
    """A pop of a whole queue is sent to one node at a time (queen.pop_queue_on_node_v1, a
    delegated call by a node's anchor), which serves it from its own shards: after the
    first pop (the group's registration for the queue, which reaches every node through
    Citus) 8 one-message partitions are drained with at most 2 calls a pop, each on its
    anchor's node, and no statement the coordinator sends reads a shard of the ready index
    itself; each partition is delivered once, and the queue then answers empty."""
    q = _name()
    with _remote_command_log(citus_cluster, citus_dsn) as logged:
        with (
            ServerProcess(citus_dsn, workers=1) as srv,
            httpx.Client(base_url=srv.url, timeout=30) as client,
        ):
            _push(client, [{"queue": q, "partition": f"p{n}", "payload": n} for n in range(9)])
            first = _pop(client, f"/api/v1/pop/queue/{q}", batch=1)
            assert first is not None and len(first["messages"]) == 1, first
            before = len(logged())
            got = list(first["messages"])
            for _ in range(8):
                popped = _pop(client, f"/api/v1/pop/queue/{q}", batch=1)
                assert popped is not None and len(popped["messages"]) == 1, popped
                assert "candidates" not in popped
                got += popped["messages"]
            drained = len(logged())
            assert _pop(client, f"/api/v1/pop/queue/{q}", batch=1, wait="false") is None
            r = client.post("/api/v1/ack/batch", json={"acknowledgments": _acks(got)})
            assert all(x["success"] for x in r.json()), r.text
        text = logged()
    assert sorted(m["data"] for m in got) == list(range(9))
    pops = text[before:drained]
    calls = _remote_calls(pops, "pop_queue_on_node_v1")
    assert 8 <= len(calls) <= 16, calls
    assert all(port == _holder(citus_dsn, anchor) for anchor, port in calls)
    assert "partition_consumers_" not in pops
