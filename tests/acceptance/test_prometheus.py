"""GET /metrics/prometheus on the real server (gunicorn -k gevent, 2 worker processes):
the text parses, counters are the sum over both processes whichever one answers the
scrape, and the numbers move when traffic flows."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.support.server import ServerProcess

Samples = list[Sample]


@pytest.fixture(scope="module")
def prom_server(pg_admin_dsn: str, template_db: str) -> Iterator[ServerProcess]:
    from tests.conftest import database_from_template

    with (
        database_from_template(pg_admin_dsn, template_db) as dsn,
        ServerProcess(dsn, workers=2) as srv,
    ):
        yield srv


def scrape(url: str) -> Samples:
    res = httpx.get(f"{url}/metrics/prometheus", timeout=10)
    assert res.status_code == 200
    assert res.headers["content-type"].startswith("text/plain")
    return [s for fam in text_string_to_metric_families(res.text) for s in fam.samples]


def value(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples called `name` whose labels include `labels`."""
    return sum(
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.1)


def push(url: str, queue: str, n: int = 1) -> None:
    items = [{"queue": queue, "payload": {"i": i}} for i in range(n)]
    res = httpx.post(f"{url}/api/v1/push", json={"items": items}, timeout=10)
    assert res.status_code == 201, res.text


def test_text_format_parses_and_names_every_family(prom_server: ServerProcess) -> None:
    url = prom_server.url
    q = f"fam-{uuid.uuid4().hex[:8]}"
    push(url, q)  # labelled families appear once they have a first sample
    msg = httpx.get(f"{url}/api/v1/pop/queue/{q}", timeout=10).json()["messages"][0]
    ack = {"transactionId": msg["transactionId"], "partitionId": msg["partitionId"],
           "leaseId": msg["leaseId"], "status": "completed"}  # fmt: skip
    assert httpx.post(f"{url}/api/v1/ack", json=ack, timeout=10).status_code == 200
    params = {"wait": "true", "timeout": 100}
    assert httpx.get(f"{url}/api/v1/pop/queue/{q}", params=params, timeout=10).status_code == 204
    res = httpx.get(f"{url}/metrics/prometheus", timeout=10)
    families = {f.name for f in text_string_to_metric_families(res.text)}
    expected = {
        "queen_http_requests", "queen_http_request_duration_seconds",
        "queen_messages_pushed", "queen_messages_popped", "queen_messages_acked",
        "queen_long_poll_wait_seconds", "queen_db_query_duration_seconds",
        "queen_db_pool_connections", "queen_db_pool_max_connections", "queen_poll_registry",
        "queen_worker_processes", "queen_queues", "queen_queue_depth",
        "queen_consumer_group_lag_messages", "queen_backlog_scrape_success",
        "queen_file_buffer_events", "queen_maintenance_mode",
    }  # fmt: skip
    assert expected <= families, sorted(expected - families)


def worker_pids(samples: Samples) -> set[str]:
    """The live worker processes, from their own start-time gauges (whichever answers)."""
    return {s.labels["pid"] for s in samples if s.name == "queen_worker_start_time_seconds"}


def test_counters_sum_over_both_worker_processes(prom_server: ServerProcess) -> None:
    url = prom_server.url
    q = f"prom-{uuid.uuid4().hex[:8]}"
    n = 40
    for _ in range(n):
        push(url, q)  # a fresh connection each time: either process may take it
    # Whichever process answers each scrape, the total is the sum over both (the test does
    # not depend on how the kernel spread the pushes: any split must add up to n).
    for _ in range(10):
        samples = scrape(url)
        assert value(samples, "queen_messages_pushed_total", queue=q, status="queued") == n
        assert value(samples, "queen_worker_processes") == 2
        assert len(worker_pids(samples)) == 2


def test_numbers_move_when_traffic_flows(prom_server: ServerProcess) -> None:
    url = prom_server.url
    q = f"flow-{uuid.uuid4().hex[:8]}"
    before = scrape(url)
    push(url, q, 5)

    eventually(lambda: value(scrape(url), "queen_queue_depth", queue=q) == 5)
    res = httpx.get(f"{url}/api/v1/pop/queue/{q}", params={"batch": 2}, timeout=10)
    assert res.status_code == 200
    msgs = res.json()["messages"]
    acks = [
        {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
         "leaseId": m["leaseId"], "status": "completed"}
        for m in msgs
    ]  # fmt: skip
    assert httpx.post(f"{url}/api/v1/ack/batch", json={"acknowledgments": acks}).status_code == 200
    # A named group that reads one message and does not ack it yet.
    grp = httpx.get(
        f"{url}/api/v1/pop/queue/{q}", params={"consumerGroup": "audit", "batch": 1}, timeout=10
    )
    assert grp.status_code == 200
    # One long poll that times out.
    empty = f"empty-{uuid.uuid4().hex[:8]}"
    res = httpx.get(
        f"{url}/api/v1/pop/queue/{empty}", params={"wait": "true", "timeout": 300}, timeout=10
    )
    assert res.status_code == 204

    def moved() -> bool:
        after = scrape(url)
        return (
            value(after, "queen_messages_popped_total", queue=q) == 3
            and value(after, "queen_messages_acked_total", queue=q, status="completed") == 2
            and value(after, "queen_queue_depth", queue=q) == 3
            and value(after, "queen_consumer_group_lag_messages", queue=q, consumer_group="audit")
            == 5
            and value(after, "queen_long_poll_wait_seconds_count", outcome="timeout")
            > value(before, "queen_long_poll_wait_seconds_count", outcome="timeout")
            and value(after, "queen_db_query_duration_seconds_count", query="push_messages")
            > value(before, "queen_db_query_duration_seconds_count", query="push_messages")
            and value(after, "queen_http_requests_total", code="201")
            > value(before, "queen_http_requests_total", code="201")
        )

    eventually(moved)
    after = scrape(url)
    assert value(after, "queen_queue_oldest_pending_age_seconds", queue=q) >= 0
    assert value(after, "queen_consumer_group_lag_seconds", queue=q, consumer_group="audit") >= 0
    assert value(after, "queen_backlog_scrape_success") == 1


def test_a_killed_worker_keeps_its_counts_and_leaves_the_live_gauges(
    pg_admin_dsn: str, template_db: str
) -> None:
    from tests.conftest import database_from_template

    with (
        database_from_template(pg_admin_dsn, template_db) as dsn,
        ServerProcess(dsn, workers=2) as srv,
    ):
        q = f"kill-{uuid.uuid4().hex[:8]}"
        for _ in range(20):
            push(srv.url, q)
        pids = worker_pids(scrape(srv.url))
        assert len(pids) == 2
        victim = int(min(pids))
        os.kill(victim, signal.SIGKILL)

        def replaced() -> bool:
            try:
                pids_now = worker_pids(scrape(srv.url))
            except httpx.HTTPError:
                return False
            return str(victim) not in pids_now and len(pids_now) == 2

        eventually(replaced, timeout=30)
        samples = scrape(srv.url)
        assert value(samples, "queen_messages_pushed_total", queue=q, status="queued") == 20
        assert value(samples, "queen_worker_processes") == 2
        starts = {s.labels["pid"] for s in samples if s.name == "queen_worker_start_time_seconds"}
        assert str(victim) not in starts and len(starts) == 2
