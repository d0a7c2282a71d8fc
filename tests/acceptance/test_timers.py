"""Timers through the real server (gunicorn -k gevent, 2 worker processes) on a real
PostgreSQL: schedule, upsert, peek, list, cancel, the fire and the wake-up of a waiting
long poll, the transaction rider, the metrics, and every kind of bad input (400 with code
`timers_bad_request`, nothing changed).

The server polls slowly by itself (SLOW_POLLING: a long poll's next pop comes 5-10 s after
the last), so a long poll answered soon after a timer's time was woken by the fire.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import psycopg2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.acceptance.test_long_poll import SLOW_POLLING
from tests.support.server import ServerProcess

API = "/api/v1"
LATE_BOUND_S = 0.5  # the fire's lateness accepted on a busy CI machine (bench (t): p50/p99)


@pytest.fixture(scope="module")
def server(module_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(module_dsn, **SLOW_POLLING) as srv:
        yield srv


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def sql(module_dsn: str) -> Iterator[Callable[..., list[tuple[Any, ...]]]]:
    conn = psycopg2.connect(module_dsn)
    conn.autocommit = True

    def run(statement: str, *args: Any) -> list[tuple[Any, ...]]:
        with conn.cursor() as cur:
            cur.execute(statement, args)
            return cur.fetchall() if cur.description else []

    yield run
    conn.close()


def b64(value: Any) -> str:
    return base64.b64encode(orjson.dumps(value)).decode()


def schedule(queue: str, key: str, payload: Any, delay_ms: int, **extra: Any) -> dict[str, Any]:
    return {"op": "schedule", "queue": queue, "timerKey": key, "payload": b64(payload),
            "delayMs": delay_ms, "txn": str(uuid.uuid4()), **extra}  # fmt: skip


def post(http: httpx.Client, *ops: dict[str, Any]) -> list[dict[str, Any]]:
    r = http.post(f"{API}/timers", json={"operations": list(ops)})
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_schedule_peek_list_upsert_and_cancel(http: httpx.Client) -> None:
    queue = name("tm-basic")
    first = post(http, schedule(queue, "k/1:a", {"v": 1}, 60_000))[0]
    assert first["ok"] is True and first["status"] == "scheduled"
    assert first["messageId"] and first["deliverAt"].endswith("Z")

    # The key is the rest of the path: `/` travels as is.
    peek = http.get(f"{API}/timers/{queue}/k/1:a").json()
    assert peek["found"] is True and peek["txn"] == first["txn"]
    assert orjson.loads(base64.b64decode(peek["payload"])) == {"v": 1}
    assert peek["encrypted"] is False and peek["messageId"] == first["messageId"]

    again = post(http, schedule(queue, "k/1:a", {"v": 2}, 30_000))[0]
    assert again["status"] == "rescheduled" and again["deliverAt"] < first["deliverAt"]
    assert http.get(f"{API}/timers/{queue}/k/1:a").json()["txn"] == again["txn"]

    post(http, *(schedule(queue, f"k{i}", {"i": i}, 60_000) for i in range(4)))
    page = http.get(f"{API}/timers/{queue}", params={"limit": 2}).json()
    assert [r["timerKey"] for r in page["rows"]] == ["k/1:a", "k0"]
    assert page["truncated"] is True and page["nextAfter"] == "k0"
    rest = http.get(f"{API}/timers/{queue}", params={"after": "k0", "limit": 10}).json()
    assert [r["timerKey"] for r in rest["rows"]] == ["k1", "k2", "k3"]
    assert rest["truncated"] is False and rest["nextAfter"] is None
    # limit is clamped, never refused
    assert len(http.get(f"{API}/timers/{queue}", params={"limit": 0}).json()["rows"]) == 1

    cancelled = http.delete(f"{API}/timers/{queue}/k/1:a").json()
    assert cancelled == {"ok": True, "status": "cancelled", "queue": queue,
                         "timerKey": "k/1:a", "txn": again["txn"]}  # fmt: skip
    absent = http.delete(f"{API}/timers/{queue}/k/1:a", params={"txn": "mine"}).json()
    assert absent["ok"] is False and absent["status"] == "absent" and absent["txn"] == "mine"
    assert http.get(f"{API}/timers/{queue}/k/1:a").json()["found"] is False


@pytest.mark.parametrize(
    "key", ["ünï cødé", "a?b#c%d", "trailing/", "/lead//double", "tab\there", "+plus&amp"]
)
def test_any_key_round_trips_through_the_path(http: httpx.Client, key: str) -> None:
    """The key travels as the rest of the path, percent-encoded as the client does it
    (`quote(key, safe="/")`): peek, list and cancel find the key that was scheduled."""
    queue = name("tm-keys")
    post(http, schedule(queue, key, {"k": key}, 60_000))
    path = f"{API}/timers/{queue}/{quote(key, safe='/')}"
    assert http.get(path).json()["timerKey"] == key
    assert [r["timerKey"] for r in http.get(f"{API}/timers/{queue}").json()["rows"]] == [key]
    assert http.delete(path).json()["status"] == "cancelled"


def test_a_timer_fires_once_on_time_and_wakes_a_waiting_long_poll(
    http: httpx.Client, sql: Callable[..., list[tuple[Any, ...]]]
) -> None:
    queue = name("tm-fire")
    http.post(f"{API}/configure", json={"queue": queue}).raise_for_status()
    res = post(http, schedule(queue, "fire", {"order": 9}, 700, partition="p1"))[0]
    started = time.monotonic()
    pop = http.get(f"{API}/pop/queue/{queue}", params={"wait": "true", "timeout": 8000})
    waited = time.monotonic() - started
    assert pop.status_code == 200, pop.text
    [message] = pop.json()["messages"]
    assert message["data"] == {"order": 9} and message["partition"] == "p1"
    assert message["transactionId"] == res["txn"] and str(message["id"]) == res["messageId"]
    assert message["createdAt"] >= res["deliverAt"], "delivered before its time"
    # Woken by the fire, not found by the slow backoff pop (5-10 s).
    assert waited < 3.0
    [(late_s, status)] = sql(
        "SELECT extract(epoch FROM fired_at - deliver_at), status FROM queen.timer_fires"
        " WHERE queue_name = %s", queue)  # fmt: skip
    assert status == "queued" and 0 <= float(late_s) < LATE_BOUND_S
    assert http.get(f"{API}/timers/{queue}/fire").json()["found"] is False
    again = http.get(f"{API}/pop/queue/{queue}", params={"wait": "false"})
    assert again.status_code == 204


def test_a_delay_in_the_past_fires_on_the_first_cycle(http: httpx.Client) -> None:
    queue = name("tm-past")
    post(http, schedule(queue, "past", {"late": True}, -60_000))
    assert wait_for(lambda: not http.get(f"{API}/timers/{queue}/past").json()["found"], 2.0)
    pop = http.get(f"{API}/pop/queue/{queue}", params={"wait": "false"})
    assert pop.status_code == 200 and pop.json()["messages"][0]["data"] == {"late": True}


def test_a_timer_rides_a_transaction_all_or_nothing(
    http: httpx.Client, sql: Callable[..., list[tuple[Any, ...]]]
) -> None:
    queue = name("tm-txn")
    http.post(f"{API}/push", json={"items": [{"queue": queue, "payload": 1}]}).raise_for_status()
    msg = http.get(f"{API}/pop/queue/{queue}", params={"wait": "false"}).json()["messages"][0]
    ack = {"type": "ack", "transactionId": msg["transactionId"],
           "partitionId": msg["partitionId"], "status": "completed"}  # fmt: skip
    bogus = {**ack, "transactionId": "not-a-message"}
    timer = schedule(queue, "saga", {"s": 1}, 60_000)

    failed = http.post(f"{API}/transaction", json={"operations": [bogus], "timers": [timer]})
    assert failed.status_code == 409 and failed.json()["success"] is False
    assert http.get(f"{API}/timers/{queue}/saga").json()["found"] is False

    body = {"operations": [ack], "timers": [timer, {"op": "cancel", "queue": queue,
                                                    "timerKey": "none"}]}  # fmt: skip
    done = http.post(f"{API}/transaction", json=body).json()
    assert done["success"] is True
    results = done["results"]
    assert [r["type"] for r in results] == ["ack", "timer", "timer"]
    assert [r["index"] for r in results] == [0, 1, 2]
    assert results[1]["status"] == "scheduled" and results[2]["status"] == "absent"
    assert http.get(f"{API}/timers/{queue}/saga").json()["txn"] == timer["txn"]

    # A bad timer op refuses the whole bundle before anything runs.
    push = {"type": "push", "items": [{"queue": queue, "payload": "never"}]}
    bad = http.post(f"{API}/transaction", json={"operations": [push], "timers": [
        timer, {**timer, "timerKey": "other", "delayMs": "soon"}]})  # fmt: skip
    assert bad.status_code == 400, bad.text
    assert bad.json()["code"] == "timers_bad_request" and "timers[1]" in bad.json()["error"]
    assert sql("SELECT count(*) FROM queen.messages WHERE payload = '\"never\"'") == [(0,)]

    # A timer-only bundle, and a cancel inside a bundle.
    cancel = {"op": "cancel", "queue": queue, "timerKey": "saga"}
    only = http.post(f"{API}/transaction", json={"operations": [], "timers": [cancel]}).json()
    assert only["success"] is True and only["results"][0]["status"] == "cancelled"
    assert http.get(f"{API}/timers/{queue}/saga").json()["found"] is False


BAD_OPS: list[tuple[str, Any]] = [
    ("not an object", "nope"),
    ("unknown op", {"op": "later", "queue": "q", "timerKey": "k"}),
    ("bad queue", {**schedule("q", "k", 1, 10), "queue": "a b"}),
    ("empty key", {**schedule("q", "k", 1, 10), "timerKey": ""}),
    ("key not a string", {**schedule("q", "k", 1, 10), "timerKey": 7}),
    ("no payload", {k: v for k, v in schedule("q", "k", 1, 10).items() if k != "payload"}),
    ("no delay", {k: v for k, v in schedule("q", "k", 1, 10).items() if k != "delayMs"}),
    ("payload not base64", {**schedule("q", "k", 1, 10), "payload": "%%%"}),
    ("payload not JSON", {**schedule("q", "k", 1, 10), "payload": "bm90IGpzb24="}),
    ("delay a string", {**schedule("q", "k", 1, 10), "delayMs": "10"}),
    ("delay a boolean", {**schedule("q", "k", 1, 10), "delayMs": True}),
    ("delay too far", {**schedule("q", "k", 1, 10), "delayMs": 10**15}),
    ("server-owned field", {**schedule("q", "k", 1, 10), "deliverAt": "2030-01-01T00:00:00Z"}),
    ("producer from the body", {**schedule("q", "k", 1, 10), "producerSub": "billing"}),
    ("compressed payload", {**schedule("q", "k", 1, 10), "payloadZstd": True}),
    ("bad partition", {**schedule("q", "k", 1, 10), "partition": "a/b"}),
    ("bad txn", {**schedule("q", "k", 1, 10), "txn": ""}),
]


@pytest.mark.parametrize(("why", "op"), BAD_OPS, ids=[why for why, _ in BAD_OPS])
def test_a_bad_op_is_a_400_that_changes_nothing(
    http: httpx.Client, sql: Callable[..., list[tuple[Any, ...]]], why: str, op: Any
) -> None:
    queue = name("tm-bad")
    good = schedule(queue, "good", {"ok": 1}, 60_000)
    if isinstance(op, dict) and op.get("queue") == "q":
        op = {**op, "queue": queue}
    r = http.post(f"{API}/timers", json={"operations": [good, op]})
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["code"] == "timers_bad_request" and body["detail"].startswith("operations[1]: ")
    assert body["error"] == f"{body['reason']}: {body['detail']}"
    assert sql("SELECT count(*) FROM queen.queues WHERE name = %s", queue) == [(0,)]


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b'{"operations": []}', b'{"operations": {}}', b"{}",
     orjson.dumps({"operations": [schedule("q", "k", 1, 10)] * 1001})],
    ids=["not json", "not an object", "empty", "not an array", "missing", "too many"],
)  # fmt: skip
def test_a_bad_body_is_a_400(http: httpx.Client, body: bytes) -> None:
    r = http.post(f"{API}/timers", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]


def test_one_key_at_most_once_per_call_and_bad_reads(
    http: httpx.Client, sql: Callable[..., list[tuple[Any, ...]]]
) -> None:
    queue = name("tm-dup")
    r = http.post(f"{API}/timers", json={"operations": [
        schedule(queue, "dup", 1, 1000), schedule(queue, "dup", 2, 2000)]})  # fmt: skip
    assert r.status_code == 400 and r.json()["code"] == "timers_bad_request"
    assert r.json()["reason"] == "duplicate_key"
    assert sql("SELECT count(*) FROM queen.timers t JOIN queen.queues q ON q.id = t.queue_id"
               " WHERE q.name = %s", queue) == [(0,)]  # fmt: skip
    for path, params in [
        (f"{API}/timers/{queue}", {"limit": "ten"}),
        (f"{API}/timers/bad%20queue", {}),
        (f"{API}/timers/bad%20queue/key", {}),
    ]:
        bad = http.get(path, params=params)
        assert bad.status_code == 400 and bad.json()["code"] == "timers_bad_request", path
    assert http.delete(f"{API}/timers/{queue}/k", params={"txn": "x" * 300}).status_code == 400


def test_metrics_show_pending_and_fired_timers(http: httpx.Client) -> None:
    queue = name("tm-metrics")
    post(http, schedule(queue, "later", 1, 600_000), schedule(queue, "now", 2, 0))
    assert wait_for(lambda: not http.get(f"{API}/timers/{queue}/now").json()["found"], 2.0)
    timers = http.get("/metrics").json()["timers"]
    assert timers["database"]["pending"] >= 1 and timers["database"]["fired"] >= 1
    assert "cycles" in timers["firer"]
    text = http.get("/metrics/prometheus").text
    assert "queen_timers_pending " in text and "queen_timers_fired_last_hour " in text
    # The fired message counts as pushed, as any message stored in a queue.
    pushed = [
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "queen_messages_pushed_total" and s.labels.get("queue") == queue
    ]
    assert pushed == [1.0]
