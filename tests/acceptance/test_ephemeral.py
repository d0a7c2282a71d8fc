"""Ephemeral queues (/api/v1/ephemeral/*) against the real gunicorn -k gevent server on real
PostgreSQL: bounds and policies, groups, explicit-ack redelivery up to retryLimit, waiting
pops woken across processes, the coded 404, bad input (400, nothing changed)."""

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

from queen_threads import migrate
from queen_threads.embedded import EmbeddedPostgres
from tests.support.server import ServerProcess

API = "/api/v1/ephemeral"


@pytest.fixture(scope="module")
def srv(module_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(module_dsn, workers=2, EVICTION_INTERVAL="300") as server:
        yield server


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def call(srv: ServerProcess, method: str, path: str, expect: int = 200, **kw: Any) -> Any:
    r = httpx.request(method, f"{srv.url}{API}{path}", timeout=30, **kw)
    assert r.status_code == expect, r.text
    return r.json()


def configure(srv: ServerProcess, q: str, **options: Any) -> Any:
    return call(srv, "POST", "/configure", json={"queue": q, "options": options})


def push(srv: ServerProcess, q: str, payloads: list[Any], expect: int = 201, **kw: Any) -> Any:
    body = {"queue": q, "messages": [{"payload": p} for p in payloads], **kw}
    return call(srv, "POST", "/push", expect, json=body)


def pop(srv: ServerProcess, q: str, **params: Any) -> list[dict[str, Any]]:
    params = {"queue": q, "batch": 100, **params}
    messages: list[dict[str, Any]] = call(srv, "GET", "/pop", params=params)["messages"]
    return messages


def ack(srv: ServerProcess, q: str, acks: list[dict[str, Any]], **kw: Any) -> list[str]:
    body = {"queue": q, "acks": acks, **kw}
    return [r["outcome"] for r in call(srv, "POST", "/ack", json=body)["results"]]


def depth(srv: ServerProcess, q: str) -> dict[str, Any]:
    answer: dict[str, Any] = call(srv, "GET", f"/queues/{q}/depth")
    return answer


def test_configuration_is_kept_and_answered(srv: ServerProcess) -> None:
    q = name("eph-config")
    answer = configure(srv, q, maxLength=10, policy="drop_oldest", windowBuffer={"ms": 5})
    assert answer["created"] and answer["declared"]
    assert answer["options"]["maxLength"] == 10
    assert answer["options"]["policy"] == "drop_oldest"
    assert answer["options"]["windowBuffer"] == {"ms": 5, "count": 0}
    again = configure(srv, q, retryLimit=7)
    assert not again["created"]
    assert (again["options"]["maxLength"], again["options"]["retryLimit"]) == (10, 7)
    gauges = depth(srv, q)
    assert (gauges["declared"], gauges["depth"], gauges["options"]["retryLimit"]) == (True, 0, 7)
    listed = call(srv, "GET", "/queues")["queues"]
    assert any(row["queue"] == q and row["declared"] for row in listed)


def test_depth_of_a_missing_queue_is_a_coded_404(srv: ServerProcess) -> None:
    r = httpx.get(f"{srv.url}{API}/queues/{name('eph-missing')}/depth", timeout=15)
    assert r.status_code == 404
    assert r.json()["code"] == "ephemeral_queue_not_found"


def test_explicit_ack_redelivers_until_the_retry_limit_then_drops_and_counts(
    srv: ServerProcess,
) -> None:
    q = name("eph-retry")
    configure(srv, q, retryLimit=1, leaseSeconds=60)
    push(srv, q, ["a", "b"])
    first = pop(srv, q)
    assert [(m["payload"], m["attempts"], m["partition"]) for m in first] == [
        ("a", 1, "Default"), ("b", 1, "Default"),
    ]  # fmt: skip
    assert pop(srv, q) == []  # both leased
    assert ack(srv, q, [{"id": first[0]["id"]}, {"id": first[1]["id"], "status": "retry"}]) == [
        "acked", "redelivered",
    ]  # fmt: skip
    again = pop(srv, q)
    assert [(m["payload"], m["attempts"], m["id"]) for m in again] == [("b", 2, first[1]["id"])]
    assert ack(srv, q, [{"id": again[0]["id"], "status": "failed"}]) == ["dropped"]
    assert pop(srv, q) == []
    gauges = depth(srv, q)
    assert (gauges["dropped"], gauges["inFlight"]) == (1, 0)
    # Acked twice, or an id nobody handed out: unknown.
    assert ack(srv, q, [{"id": first[0]["id"]}, {"id": "nonsense"}]) == ["unknown", "unknown"]


def test_a_lease_that_runs_out_redelivers_and_wakes_a_waiting_pop(srv: ServerProcess) -> None:
    q = name("eph-lease")
    configure(srv, q, leaseSeconds=1)
    push(srv, q, ["x"])
    first = pop(srv, q)
    started = time.monotonic()
    again = pop(srv, q, wait="true", timeout=10000)
    waited = time.monotonic() - started
    assert [(m["id"], m["attempts"]) for m in again] == [(first[0]["id"], 2)]
    assert 0.5 < waited < 3  # the lease's second, not the 10 s timeout


def test_window_buffer_lets_a_waiting_pop_fatten_its_batch(srv: ServerProcess) -> None:
    q = name("eph-window")
    configure(srv, q, windowBuffer={"ms": 600, "count": 3})
    push(srv, q, ["a"])
    started = time.monotonic()
    held = pop(srv, q, wait="true", timeout=5000, autoAck="true")
    waited = time.monotonic() - started
    assert [m["payload"] for m in held] == ["a"]
    assert 0.4 < waited < 3  # held for the window's 600 ms, not the 5 s timeout
    push(srv, q, ["b", "c", "d"])
    started = time.monotonic()
    full = pop(srv, q, wait="true", timeout=5000, autoAck="true")
    assert [m["payload"] for m in full] == ["b", "c", "d"]
    assert time.monotonic() - started < 0.5  # count reached: no wait
    push(srv, q, ["e"])
    assert [m["payload"] for m in pop(srv, q, autoAck="true")] == ["e"]  # no wait, no window


def test_groups_have_their_own_cursors(srv: ServerProcess) -> None:
    q = name("eph-groups")
    push(srv, q, [1, 2, 3, 4])
    tail_a = pop(srv, q, group="tail-a", autoAck="true")
    tail_b = pop(srv, q, group="tail-b", autoAck="true")
    assert [m["payload"] for m in tail_a] == [m["payload"] for m in tail_b] == [1, 2, 3, 4]
    w1 = pop(srv, q, group="workers", batch=2, autoAck="true")
    w2 = pop(srv, q, group="workers", batch=2, autoAck="true")
    assert [m["payload"] for m in w1 + w2] == [1, 2, 3, 4]
    assert pop(srv, q, group="workers") == []
    groups = {g["group"]: g for g in depth(srv, q)["groups"]}
    assert set(groups) == {"tail-a", "tail-b", "workers"}


def test_partitions_are_fifo_each(srv: ServerProcess) -> None:
    q = name("eph-parts")
    push(srv, q, ["a1", "a2"], partition="a")
    push(srv, q, ["b1"], partition="b")
    assert [m["payload"] for m in pop(srv, q, partition="b", autoAck="true")] == ["b1"]
    assert [(m["payload"], m["partition"]) for m in pop(srv, q, autoAck="true")] == [
        ("a1", "a"), ("a2", "a"),
    ]  # fmt: skip


def test_reject_policy_answers_429_and_stores_nothing(srv: ServerProcess) -> None:
    q = name("eph-reject")
    configure(srv, q, maxLength=3)
    push(srv, q, [1, 2])
    r = httpx.post(f"{srv.url}{API}/push", timeout=15,
                   json={"queue": q, "messages": [{"payload": 3}, {"payload": 4}]})  # fmt: skip
    assert r.status_code == 429
    assert r.headers["Retry-After"] == "1"
    assert r.json()["code"] == "ephemeral_queue_full"
    assert depth(srv, q)["depth"] == 2
    # Messages every group is done with make room.
    pop(srv, q, autoAck="true")
    push(srv, q, [3, 4, 5])
    assert [m["payload"] for m in pop(srv, q, autoAck="true")] == [3, 4, 5]
    # A push larger than the bounds themselves is a 400 whatever the policy.
    too_big = push(srv, q, [1, 2, 3, 4], expect=400)
    assert "larger than" in too_big["error"]


def test_drop_oldest_policy_makes_room_and_counts(srv: ServerProcess) -> None:
    q = name("eph-drop")
    configure(srv, q, maxLength=3, policy="drop_oldest")
    push(srv, q, [1, 2, 3])
    push(srv, q, [4, 5])
    gauges = depth(srv, q)
    assert (gauges["depth"], gauges["dropped"]) == (3, 2)
    assert [m["payload"] for m in pop(srv, q, autoAck="true")] == [3, 4, 5]


def test_ttl_drops_old_messages(srv: ServerProcess) -> None:
    q = name("eph-ttl")
    configure(srv, q, ttlSeconds=1)
    push(srv, q, ["old"])
    deadline = time.monotonic() + 20
    while depth(srv, q)["depth"] and time.monotonic() < deadline:
        time.sleep(0.1)  # the eviction job (every 300 ms here) expires it: poll its effect
    gauges = depth(srv, q)
    assert (gauges["depth"], gauges["dropped"]) == (0, 1)
    assert pop(srv, q) == []


def test_reset_drops_everything_and_old_acks_are_stale(srv: ServerProcess) -> None:
    q = name("eph-reset")
    configure(srv, q, maxLength=50)
    push(srv, q, [1, 2, 3])
    taken = pop(srv, q, batch=1)
    assert call(srv, "POST", "/reset", json={"queue": q}) == {"queue": q, "dropped": 3}
    assert ack(srv, q, [{"id": taken[0]["id"]}]) == ["stale"]
    gauges = depth(srv, q)
    assert (gauges["depth"], gauges["inFlight"], gauges["options"]["maxLength"]) == (0, 0, 50)
    push(srv, q, [9])
    assert [m["payload"] for m in pop(srv, q)] == [9]
    assert call(srv, "POST", "/reset", json={"queue": name("eph-none")})["dropped"] == 0


def test_delete_removes_contents_and_configuration(srv: ServerProcess) -> None:
    q = name("eph-delete")
    configure(srv, q, maxLength=5)
    push(srv, q, [1])
    assert call(srv, "DELETE", f"/queue/{q}") == {"queue": q, "deleted": True}
    assert call(srv, "DELETE", f"/queue/{q}") == {"queue": q, "deleted": False}
    assert httpx.get(f"{srv.url}{API}/queues/{q}/depth", timeout=15).status_code == 404


def test_a_push_from_outside_this_server_wakes_a_waiting_pop(srv: ServerProcess) -> None:
    """A push that no server process made (plain SQL) opens no gate in any process: only
    the watcher, which reads the queue's version every 50 ms, can wake the pop."""
    q = name("eph-watch")
    pop(srv, q)  # the queue exists
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pop(srv, q, wait="true", timeout=10000)))
    waiter.start()
    deadline = time.monotonic() + 10
    conn = psycopg2.connect(srv.env["DATABASE_URL"])
    conn.autocommit = True
    try:
        with conn.cursor() as cur:  # wait until the pop is waiting (the watcher runs)
            while time.monotonic() < deadline:
                metrics = httpx.get(f"{srv.url}/metrics", timeout=15).json()["ephemeral"]
                if metrics["waitingPops"]:
                    break
            body = {"queue": q, "partition": "Default", "messages": [{"payload": "sql"}]}
            pushed_at = time.monotonic()
            cur.execute("SELECT queen.ephemeral_push_v1(%s::jsonb)", (json.dumps(body),))
    finally:
        conn.close()
    waiter.join(15)
    assert [m["payload"] for m in got[0]] == ["sql"]
    assert time.monotonic() - pushed_at < 2  # not the 10 s timeout


def test_metrics_show_the_ephemeral_totals(srv: ServerProcess) -> None:
    q = name("eph-metrics")
    push(srv, q, [1, 2])
    totals = httpx.get(f"{srv.url}/metrics", timeout=15).json()["ephemeral"]
    assert totals["depth"] >= 2 and "dropped" in totals and "inFlight" in totals
    deadline = time.monotonic() + 20
    text = ""
    while "queen_ephemeral_messages" not in text and time.monotonic() < deadline:
        time.sleep(0.1)  # the eviction job (every 300 ms) sets the gauges: poll its effect
        text = httpx.get(f"{srv.url}/metrics/prometheus", timeout=15).text
    assert "queen_ephemeral_messages" in text and "queen_ephemeral_dropped" in text


def _options(**options: Any) -> dict[str, Any]:
    return {"json": {"queue": "q", "options": options}}


def _messages(*messages: Any, queue: str = "q") -> dict[str, Any]:
    return {"json": {"queue": queue, "messages": list(messages)}}


def _acks(*acks: Any) -> dict[str, Any]:
    return {"json": {"queue": "q", "acks": list(acks)}}


@pytest.mark.parametrize(
    ("method", "path", "kw", "message"),
    [
        ("POST", "/configure", {"json": {"options": {}}}, "queue must be a string"),
        ("POST", "/configure", {"json": {"queue": "q", "options": []}}, "options must be an"),
        ("POST", "/configure", _options(maxLength=0), "maxLength"),
        ("POST", "/configure", _options(policy="lru"), "policy"),
        ("POST", "/configure", _options(ttlSeconds="1"), "ttlSeconds"),
        ("POST", "/configure", _options(windowBuffer=5), "windowBuffer"),
        ("POST", "/push", {"json": {"queue": "q"}}, "messages must be a non-empty array"),
        ("POST", "/push", _messages(1), "messages[0] must be an object"),
        ("POST", "/push", _messages({"data": 1}), "with a payload"),
        ("POST", "/push", _messages({"payload": 1}, queue="a b"), "Invalid queue name"),
        ("GET", "/pop", {"params": {}}, "queue must be a string"),
        ("GET", "/pop", {"params": {"queue": "q", "batch": "0"}}, "batch must be between"),
        ("GET", "/pop", {"params": {"queue": "q", "timeout": "x"}}, "timeout must be an integer"),
        ("POST", "/ack", _acks(), "acks must be a non-empty array"),
        ("POST", "/ack", _acks({"id": 1}), "acks[0] must be an object"),
        ("POST", "/ack", _acks({"id": "x", "status": "ok"}), "status"),
        ("POST", "/reset", {"json": {}}, "queue must be a string"),
    ],
)
def test_bad_input_is_a_400_and_changes_nothing(
    srv: ServerProcess, method: str, path: str, kw: dict[str, Any], message: str
) -> None:
    before = call(srv, "GET", "/queues")
    answer = call(srv, method, path, 400, **kw)
    assert message in answer["error"]
    assert call(srv, "GET", "/queues") == before


def test_a_postgres_crash_empties_the_rings_and_keeps_the_configuration(
    private_pg: EmbeddedPostgres,
) -> None:
    """The contract of the class on a PostgreSQL of the test's own, stopped in immediate
    mode (a crash: the UNLOGGED rings are emptied at the next start)."""
    migrate.migrate(private_pg.dsn)
    with ServerProcess(private_pg.dsn, workers=1) as server:
        q = name("eph-crash")
        configure(server, q, maxLength=42, retryLimit=5)
        push(server, q, ["lost"])
        taken = pop(server, q, batch=1)
        private_pg.stop("immediate")
        private_pg.restart()  # same port: the server reconnects
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the server's pool reconnects by itself
            if httpx.get(f"{server.url}/health", timeout=5).status_code == 200:
                break
            time.sleep(0.2)
        gauges = depth(server, q)
        assert (gauges["declared"], gauges["depth"], gauges["inFlight"]) == (True, 0, 0)
        assert (gauges["options"]["maxLength"], gauges["options"]["retryLimit"]) == (42, 5)
        assert pop(server, q) == []
        assert ack(server, q, [{"id": taken[0]["id"]}]) == ["stale"]
        push(server, q, ["after"])
        assert [m["payload"] for m in pop(server, q)] == ["after"]
