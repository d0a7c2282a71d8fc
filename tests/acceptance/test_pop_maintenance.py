"""Pop maintenance mode (`POST /api/v1/system/maintenance/pop`, queenctl's `maintenance on
--pop`) on two real instances on one database, as queenctl's own test uses it: while it is
on, every pop (wait=false and long polls) answers 204 through every worker process and
every instance, and the message stays; once it is off, pops deliver it again.

Within an instance the switch holds in every worker before the POST is answered (the
maintenance page the workers share, queen_threads/background/flags.py): with each worker's
own copy refreshed every second, the other worker handed the message out (autoAck: gone).
Another instance picks it up from the database within about a second (its /health says
when)."""

from __future__ import annotations

import contextlib
import socket
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.support.outage import wait_for
from tests.support.rawhttp import exchange, one_per_worker
from tests.support.server import ServerProcess

API = "/api/v1"
LONG_POLL_MS = 3000


@pytest.fixture(scope="module")
def instances(pg_admin_dsn: str, template_db: str) -> Iterator[tuple[ServerProcess, ...]]:
    """A (2 worker processes) and B (1) on one database."""
    from tests.conftest import database_from_template

    with database_from_template(pg_admin_dsn, template_db) as dsn, contextlib.ExitStack() as stack:
        a, b = ServerProcess(dsn, workers=2), ServerProcess(dsn, workers=1)
        for srv in (a, b):
            srv.spawn()
            stack.callback(srv.stop)
        for srv in (a, b):
            srv.wait_healthy()
        yield a, b


def switch(srv: ServerProcess, enabled: bool) -> None:
    r = httpx.post(f"{srv.url}{API}/system/maintenance/pop", json={"enabled": enabled})
    assert r.status_code == 200 and r.json()["popMaintenanceMode"] is enabled


def pop_as(sock: socket.socket, queue: str, group: str, wait: bool = False) -> tuple[int, int]:
    """queenctl's pop: a consumer group's first contact reading from the start, autoAck.
    (status, messages delivered)."""
    wait_part = f"&wait=true&timeout={LONG_POLL_MS}" if wait else "&wait=false"
    path = (
        f"{API}/pop/queue/{queue}?consumerGroup={group}&subscriptionMode=all&autoAck=true"
        f"&batch=5{wait_part}"
    )
    status, body = exchange(sock, "GET", path)
    return status, len(body["messages"]) if body else 0


def seen_by(srv: ServerProcess, enabled: bool) -> bool:
    return bool(httpx.get(f"{srv.url}/health").json()["pop_maintenance_mode"] is enabled)


@pytest.fixture
def queue(instances: tuple[ServerProcess, ...]) -> Iterator[str]:
    """A queue holding one message; pop maintenance is off again after the test."""
    a, _ = instances
    name = f"pm-{uuid.uuid4().hex[:10]}"
    r = httpx.post(f"{a.url}{API}/push", json={"items": [{"queue": name, "payload": {"v": 1}}]})
    assert r.status_code == 201
    yield name
    switch(a, False)


def test_on_through_one_worker_every_worker_pops_nothing_and_the_message_stays(
    instances: tuple[ServerProcess, ...], queue: str
) -> None:
    a, _ = instances
    workers = one_per_worker(a.port, 2)
    try:
        switch(a, True)  # handled by either worker; the next pops go to both, at once
        for sock in workers.values():
            assert pop_as(sock, queue, "cg-maint") == (204, 0)
            started = time.monotonic()
            assert pop_as(sock, queue, "cg-maint", wait=True) == (204, 0)
            assert time.monotonic() - started < LONG_POLL_MS / 2000  # answered at once
        switch(a, False)
        first, second = workers.values()
        assert pop_as(first, queue, "cg-maint", wait=True) == (200, 1)  # it stayed
        assert pop_as(second, queue, "cg-maint") == (204, 0)  # and is delivered once
    finally:
        for sock in workers.values():
            sock.close()


def test_another_instance_follows_the_switch_and_the_message_stays(
    instances: tuple[ServerProcess, ...], queue: str
) -> None:
    a, b = instances
    switch(a, True)
    wait_for(lambda: seen_by(b, True), timeout=5, what="instance B in pop maintenance")
    with socket.create_connection(("127.0.0.1", b.port)) as sock:
        assert pop_as(sock, queue, "cg-b") == (204, 0)
        assert pop_as(sock, queue, "cg-b", wait=True) == (204, 0)
        status, _ = exchange(sock, "GET", f"{API}/pop/queue/{queue}?wait=false")
        assert status == 204  # the queue's own consumers too
        switch(a, False)
        wait_for(lambda: seen_by(b, False), timeout=5, what="instance B out of pop maintenance")
        assert pop_as(sock, queue, "cg-b", wait=True) == (200, 1)
        status, body = exchange(sock, "GET", f"{API}/pop/queue/{queue}?wait=false")
        assert status == 200 and body["messages"][0]["data"] == {"v": 1}
