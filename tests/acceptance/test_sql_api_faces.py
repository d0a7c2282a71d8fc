"""The two faces of one queue with the real servers (docs/sql.md): a transaction that
produces from SQL wakes the long polls waiting on every instance when it commits, and
never when it rolls back; an SQL consume gets what is pushed over HTTP.

Both instances poll slowly by themselves (SLOW_POLLING: a group's next pop comes 5-10 s
after the last), so a long poll answered within WAKE_WITHIN_S of the commit was woken by it
(checked by leaving out the trigger partition_lookup_sql_wakes of migration 0027: every
waiter here answered only at its next backoff pop, seconds late)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.acceptance.test_long_poll import SLOW_POLLING, Waiter
from tests.support.server import ServerProcess, all_started
from tests.support.sql_api import SqlFace

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)

WAKE_WITHIN_S = 2.0  # commit -> long poll answered on another instance (backoff: 5 s)


@pytest.fixture(scope="module")
def instances(module_dsn: str) -> Iterator[list[ServerProcess]]:
    """Two servers (2 and 1 worker processes) on one database, polling slowly."""
    with all_started(
        [ServerProcess(module_dsn, workers=n, **SLOW_POLLING) for n in (2, 1)]
    ) as servers:
        yield servers


def qname() -> str:
    return f"faces-{uuid.uuid4().hex[:8]}"


def wait_interest(dsn: str, queue: str, origins: int) -> None:
    """Until `origins` server processes have said they wait for the queue (the rows their
    long polls write before they pop: wake/interest.py)."""
    face = SqlFace(dsn, autocommit=True)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            seen = face.one(
                "SELECT count(DISTINCT origin) FROM queen.wake_interest"
                " WHERE selector ->> 'queue' = %s AND expires_at > now()",
                queue,
            )
            if seen >= origins:
                return
            time.sleep(0.02)
        raise AssertionError(f"{origins} processes waiting for {queue} expected, saw {seen}")
    finally:
        face.close()


def notify_wakeups(url: str) -> float:
    text = httpx.get(f"{url}/metrics/prometheus", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (sample.name == "queen_poll_worker_wakeups_total"
                    and sample.labels.get("source") == "notify"):  # fmt: skip
                return sample.value
    return 0.0


def answered(waiter: Waiter) -> list[Any]:
    assert waiter.response is not None and waiter.response.status_code == 200
    return [m["data"] for m in waiter.response.json()["messages"]]


def test_an_sql_commit_wakes_the_long_polls_of_every_instance(
    instances: list[ServerProcess], module_dsn: str
) -> None:
    q = qname()
    waiters = [Waiter(srv.url, q, timeout_ms=15000, consumerGroup=f"g{i}")
               for i, srv in enumerate(instances)]  # fmt: skip
    for waiter in waiters:
        waiter.start()
    wait_interest(module_dsn, q, origins=2)
    app = SqlFace(module_dsn)
    app.produce_one(q, {"order": 1})
    time.sleep(0.3)
    assert all(w.response is None for w in waiters)  # not before the commit
    committed_at = time.monotonic()
    app.commit()
    app.close()
    for waiter in waiters:
        waiter.join(15)
        assert answered(waiter) == [{"order": 1}]
        assert waiter.answered_at - committed_at < WAKE_WITHIN_S


def test_a_rolled_back_produce_wakes_nobody_and_the_next_commit_does(
    instances: list[ServerProcess], module_dsn: str
) -> None:
    q = qname()
    a = instances[1]
    waiter = Waiter(a.url, q, timeout_ms=15000)
    waiter.start()
    wait_interest(module_dsn, q, origins=1)
    time.sleep(1.2)  # the sampled counter has caught up (once a second)
    before = notify_wakeups(a.url)
    app = SqlFace(module_dsn)
    app.produce_one(q, "rolled back")
    app.rollback()
    time.sleep(1.2)
    assert waiter.response is None and notify_wakeups(a.url) == before
    app.produce_one(q, "kept")
    committed_at = time.monotonic()
    app.commit()
    app.close()
    waiter.join(15)
    assert answered(waiter) == ["kept"] and waiter.answered_at - committed_at < WAKE_WITHIN_S


def test_an_sql_consume_gets_what_http_pushes_meanwhile(
    instances: list[ServerProcess], module_dsn: str
) -> None:
    q = qname()
    app = SqlFace(module_dsn)
    got: list[list[dict[str, Any]]] = []
    consumer = threading.Thread(target=lambda: got.append(app.consume_one(q, timeout_seconds=10)))
    consumer.start()
    time.sleep(0.3)  # waiting
    r = httpx.post(f"{instances[0].url}/api/v1/push",
                   json={"items": [{"queue": q, "payload": "over http"}]})  # fmt: skip
    assert r.status_code == 201
    consumer.join(15)
    [row] = got[0]
    assert row["payload"] == "over http" and row["id"] == int(r.json()[0]["message_id"])
    assert app.commit_one(row)
    app.commit()
    app.close()
    pop = httpx.get(f"{instances[1].url}/api/v1/pop/queue/{q}", params={"wait": "false"})
    assert pop.status_code == 204  # committed from SQL: nothing left for HTTP
