"""Wake-ups between the worker processes of one instance go over their Unix sockets
(wake/siblings.py), not through the database; another instance still gets its NOTIFY."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.acceptance.test_long_poll import SLOW_POLLING, wait_registered
from tests.acceptance.test_wake_instances import clients_by_worker
from tests.support.server import ServerProcess

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)


@contextmanager
def one_connection_per_worker(url: str, workers: int = 2) -> Iterator[list[httpx.Client]]:
    """Keep-alive clients, one held by each worker process (asked who it is)."""
    with ExitStack() as stack:
        by_pid: dict[int, httpx.Client] = {}
        for _ in range(40):
            client = stack.enter_context(httpx.Client(base_url=url, timeout=20))
            pid = client.get("/metrics").json()["worker"]["pid"]
            by_pid.setdefault(pid, client)
            if len(by_pid) == workers:
                yield list(by_pid.values())
                return
        pytest.fail(f"40 connections reached only the worker processes {sorted(by_pid)}")


def counter(url: str, name: str, label: str, value: str) -> float:
    """A Prometheus counter summed over the instance's worker processes."""
    text = httpx.get(f"{url}/metrics/prometheus", timeout=5).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and sample.labels.get(label) == value
    )


def sibling_wakeups(url: str) -> float:
    return counter(url, "queen_poll_worker_wakeups_total", "source", "sibling")


def wake_batches(url: str) -> float:
    return counter(url, "queen_db_query_duration_seconds_count", "query", "wake_batch")


class LongPoll(threading.Thread):
    """A long poll on a given connection (so: in a given worker process)."""

    def __init__(self, client: httpx.Client, queue: str) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.path = f"/api/v1/pop/queue/{queue}"
        self.response: httpx.Response | None = None
        self.answered_at = 0.0
        self.start()

    def run(self) -> None:
        self.response = self.client.get(self.path, params={"wait": "true", "timeout": "10000"})
        self.answered_at = time.monotonic()

    def data(self) -> Any:
        self.join(15)
        assert self.response is not None and self.response.status_code == 200
        return self.response.json()["messages"][0]["data"]


def test_a_push_wakes_a_long_poll_in_the_other_worker_without_the_database(
    migrated_dsn: str,
) -> None:
    q = f"sib-{uuid.uuid4().hex[:10]}"
    with (
        ServerProcess(migrated_dsn, workers=2, **SLOW_POLLING) as srv,
        one_connection_per_worker(srv.url) as (first, second),
    ):
        for n, (waiter, pusher) in enumerate([(first, second), (second, first)] * 2):
            poll = LongPoll(waiter, q)
            wait_registered(srv.url, 1, exactly=True)
            pushed_at = time.monotonic()
            item = {"queue": q, "partition": f"p{n}", "payload": n}  # the last one is leased
            r = pusher.post("/api/v1/push", json={"items": [item]})
            assert r.status_code == 201, r.text
            assert poll.data() == n
            assert poll.answered_at - pushed_at < 1.0, "a wake-up, not the 5 s poll"
            wait_registered(srv.url, 0, exactly=True)
        deadline = time.monotonic() + 5  # each process samples its counters once a second
        while sibling_wakeups(srv.url) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sibling_wakeups(srv.url) >= 4
        assert wake_batches(srv.url) == 0, "no NOTIFY: nobody out of the sockets' reach waits"


def test_another_instance_waiting_too_still_gets_its_notify(migrated_dsn: str) -> None:
    q = f"sib-{uuid.uuid4().hex[:10]}"
    with (
        ServerProcess(migrated_dsn, workers=2, **SLOW_POLLING) as a,
        ServerProcess(migrated_dsn, workers=1, **SLOW_POLLING) as b,
        one_connection_per_worker(a.url) as (first, second),
        httpx.Client(base_url=b.url, timeout=20) as far,
    ):
        polls = [LongPoll(first, q), LongPoll(far, q)]
        wait_registered(a.url, 1, exactly=True)
        wait_registered(b.url, 1, exactly=True)
        pushed_at = time.monotonic()
        items = [{"queue": q, "partition": f"p{n}", "payload": n} for n in (1, 2)]
        r = second.post("/api/v1/push", json={"items": items})
        assert r.status_code == 201, r.text
        assert sorted(poll.data() for poll in polls) == [1, 2]
        assert all(poll.answered_at - pushed_at < 1.0 for poll in polls)
        deadline = time.monotonic() + 5  # each process samples its counters once a second
        while wake_batches(a.url) < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert wake_batches(a.url) >= 1, "the other instance's wake-up went through NOTIFY"


WAKE_PATH = (
    "push_messages",
    "push_partition",
    "pop_batch",
    "pop_partition",
    "wake_batch",
    "wake_interest",
    "wake_interest_read",
    "wake_epoch",
)
"""The statements a wake-up could cost: the push, the waiter's pop, the wake-up's own."""


def statements(url: str) -> dict[str, float]:
    """Calls of each statement of `WAKE_PATH`, summed over the instance's processes (the
    query histograms are written as each call ends, not sampled)."""
    text = httpx.get(f"{url}/metrics/prometheus", timeout=5).text
    calls = dict.fromkeys(WAKE_PATH, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.labels.get("query")
            if sample.name == "queen_db_query_duration_seconds_count" and name in calls:
                calls[name] += sample.value
    return calls


def test_a_wake_up_costs_no_statement_but_the_waiters_pop(migrated_dsn: str) -> None:
    """From a push to its long poll's answer the server runs two statements, the push and
    the waiter's pop, whether the waiter is in another worker process or the pusher's own:
    no interest read, no NOTIFY, nothing between them (issue 41: the wake-up's latency
    is the pop's). A push that returns a newer wake-interest epoch reads the others'
    interest first (wake/targets.py): each process's first long poll on the queue moves
    the epoch, so the third pass is the one measured."""
    q = f"sib-{uuid.uuid4().hex[:10]}"
    with (
        ServerProcess(migrated_dsn, workers=2, **SLOW_POLLING) as srv,
        ExitStack() as stack,
    ):
        (a, a2), (b, _) = clients_by_worker(stack, srv.url, 2)
        pairs = [(a, b), (b, a), (a, a2)]  # (waiter, pusher): siblings both ways, one process
        for n, (waiter, pusher) in enumerate(pairs * 3):
            popped = statements(srv.url)["pop_batch"]
            poll = LongPoll(waiter, q)
            deadline = time.monotonic() + 10
            while statements(srv.url)["pop_batch"] == popped:  # its first, empty pop is done
                assert time.monotonic() < deadline, "the long poll was not popped for"
                time.sleep(0.02)
            before = statements(srv.url)
            item = {"queue": q, "partition": f"p{n}", "payload": n}  # each poll leases its own
            r = pusher.post("/api/v1/push", json={"items": [item]})
            assert r.status_code == 201, r.text
            assert poll.data() == n
            after = statements(srv.url)
            spent = {name: after[name] - before[name] for name in WAKE_PATH}
            if n >= 2 * len(pairs):
                pushed = spent.pop("push_messages") + spent.pop("push_partition")
                assert pushed == 1 and spent == dict.fromkeys(spent, 0) | {"pop_batch": 1}, spent
