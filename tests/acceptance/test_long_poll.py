"""Long polling against the real gunicorn -k gevent server (2 worker processes)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.rawhttp import read_answer
from tests.support.server import ServerProcess

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)


@pytest.fixture(scope="module")
def lp_server(pg_admin_dsn: str, template_db: str) -> Iterator[ServerProcess]:
    from tests.conftest import database_from_template

    with database_from_template(pg_admin_dsn, template_db) as dsn, ServerProcess(dsn) as srv:
        yield srv


def qname() -> str:
    return f"lp-{uuid.uuid4().hex[:10]}"


def push(url: str, queue: str, payload: Any = None, partition: str = "Default") -> None:
    item = {"queue": queue, "partition": partition, "payload": payload}
    r = httpx.post(f"{url}/api/v1/push", json={"items": [item]})
    assert r.status_code == 201, r.text
    assert r.json()[0]["status"] == "queued"


class Waiter(threading.Thread):
    """A long poll in a thread; `started` is set once the request is on the wire."""

    def __init__(
        self,
        url: str,
        queue: str,
        timeout_ms: int = 10000,
        headers: dict[str, str] | None = None,
        **params: Any,
    ) -> None:
        super().__init__(daemon=True)
        self.url = f"{url}/api/v1/pop/queue/{queue}"
        self.headers = headers
        self.params = {"wait": "true", "timeout": str(timeout_ms), **params}
        self.timeout_s = timeout_ms / 1000 + 5
        self.response: httpx.Response | None = None
        self.answered_at = 0.0

    def run(self) -> None:
        self.response = httpx.get(
            self.url, params=self.params, headers=self.headers, timeout=self.timeout_s
        )
        self.answered_at = time.monotonic()


def wait_registered(url: str, count: int, timeout: float = 10.0, exactly: bool = False) -> None:
    """Until the server reports `count` (or, `exactly`, only `count`) waiting long polls.

    Read from the Prometheus gauge, which sums every worker process whichever one answers
    the scrape (each samples its registry once a second): no dependence on which worker
    process the kernel hands a connection to."""
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:
        seen = registered(url)
        if seen == count or (not exactly and seen > count):
            return
        time.sleep(0.05)
    raise AssertionError(f"expected {count} waiting long polls, saw {seen}")


def registered(url: str) -> int:
    """Waiting long polls summed over the server's worker processes."""
    text = httpx.get(f"{url}/metrics/prometheus", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "queen_poll_registry" and sample.labels.get("kind") == "intentions":
                return int(sample.value)
    return 0


def test_long_poll_answered_when_message_pushed_later(lp_server: ServerProcess) -> None:
    q = qname()
    waiter = Waiter(lp_server.url, q)
    waiter.start()
    wait_registered(lp_server.url, 1)
    pushed_at = time.monotonic()
    push(lp_server.url, q, {"hello": "later"})
    waiter.join(10)
    assert waiter.response is not None
    assert waiter.response.status_code == 200
    assert waiter.response.json()["messages"][0]["data"] == {"hello": "later"}
    assert waiter.answered_at - pushed_at < 1.0, "woken by the push, not by a slow poll"


def test_long_poll_times_out_with_204_on_time(lp_server: ServerProcess) -> None:
    started = time.monotonic()
    r = httpx.get(
        f"{lp_server.url}/api/v1/pop/queue/{qname()}",
        params={"wait": "true", "timeout": "1000"},
        timeout=10,
    )
    elapsed = time.monotonic() - started
    assert r.status_code == 204
    assert r.content == b""
    assert 0.95 <= elapsed <= 1.3, f"answered after {elapsed:.3f}s for a 1 s timeout"


def test_timeout_is_clamped_to_max_timeout(migrated_dsn: str) -> None:
    with ServerProcess(migrated_dsn, workers=1, MAX_TIMEOUT="500") as srv:
        started = time.monotonic()
        r = httpx.get(
            f"{srv.url}/api/v1/pop/queue/{qname()}",
            params={"wait": "true", "timeout": "60000"},
            timeout=10,
        )
        assert r.status_code == 204
        assert time.monotonic() - started < 1.5


def assert_push_wakes(sender: ServerProcess, receiver: ServerProcess, within_s: float) -> None:
    """A long poll waiting on `receiver` gets a message pushed on `sender` promptly."""
    q = qname()
    waiter = Waiter(receiver.url, q, timeout_ms=15000)
    waiter.start()
    wait_registered(receiver.url, 1)
    pushed_at = time.monotonic()
    push(sender.url, q, "across")
    waiter.join(15)
    assert waiter.response is not None and waiter.response.status_code == 200
    assert waiter.response.json()["messages"][0]["data"] == "across"
    assert waiter.answered_at - pushed_at < within_s


# Poll workers that would find a message by themselves only after seconds: a prompt answer
# can only come from a wake-up.
SLOW_POLLING = {"POLL_DB_INTERVAL": "5000", "QUEUE_MAX_POLL_INTERVAL": "10000"}


def test_push_on_instance_b_wakes_long_poll_on_instance_a(migrated_dsn: str) -> None:
    """The push's wake-up reaches the other instance after the commit (NOTIFY sent by the
    pusher's wake notifier, not from inside the push transaction)."""
    with (
        ServerProcess(migrated_dsn, workers=1, **SLOW_POLLING) as a,
        ServerProcess(migrated_dsn, workers=1) as b,
    ):
        assert_push_wakes(sender=b, receiver=a, within_s=1.0)  # LISTEN/NOTIFY


def test_ack_on_instance_b_frees_the_partition_for_a_long_poll_on_instance_a(
    migrated_dsn: str,
) -> None:
    """A freed lease wakes the other instance's waiters on that partition."""
    q = qname()
    with (
        ServerProcess(migrated_dsn, workers=1, **SLOW_POLLING) as a,
        ServerProcess(migrated_dsn, workers=1) as b,
    ):
        push(b.url, q, "first")
        push(b.url, q, "second")
        held = httpx.get(f"{b.url}/api/v1/pop/queue/{q}", params={"batch": "1"}, timeout=10)
        [first] = held.json()["messages"]
        waiter = Waiter(a.url, q, timeout_ms=15000)  # the partition is leased: it waits
        waiter.start()
        wait_registered(a.url, 1)
        acked_at = time.monotonic()
        ack = {"transactionId": first["transactionId"], "partitionId": first["partitionId"],
               "leaseId": first["leaseId"], "status": "completed"}  # fmt: skip
        r = httpx.post(f"{b.url}/api/v1/ack", json=ack, timeout=10)
        assert r.status_code == 200 and r.json()[0]["leaseReleased"], r.text
        waiter.join(15)
        assert waiter.response is not None and waiter.response.status_code == 200
        assert waiter.response.json()["messages"][0]["data"] == "second"
        assert waiter.answered_at - acked_at < 1.0


def raw_long_poll(port: int, path: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def test_disconnected_waiter_does_not_strand_the_message(lp_server: ServerProcess) -> None:
    q = qname()
    gone = raw_long_poll(lp_server.port, f"/api/v1/pop/queue/{q}?wait=true&timeout=20000")
    wait_registered(lp_server.url, 1)
    gone.close()
    wait_registered(lp_server.url, 0, exactly=True)  # withdrawn at once
    # The departed client's intention is withdrawn; the next waiter gets the message now
    # (the queue's lease time is 300 s, so a stranded lease would block it for minutes).
    waiter = Waiter(lp_server.url, q, timeout_ms=8000)
    waiter.start()
    wait_registered(lp_server.url, 1)
    push(lp_server.url, q, "for the living")
    waiter.join(10)
    assert waiter.response is not None and waiter.response.status_code == 200
    assert waiter.response.json()["messages"][0]["data"] == "for the living"


def test_lease_taken_for_a_departed_client_is_released(lp_server: ServerProcess) -> None:
    q = qname()
    # Two departed clients and no push yet: whichever is popped for must give the lease back.
    socks = [
        raw_long_poll(lp_server.port, f"/api/v1/pop/queue/{q}?wait=true&timeout=20000")
        for _ in range(2)
    ]
    wait_registered(lp_server.url, 2)
    for s in socks:
        s.close()
    push(lp_server.url, q, "x")
    r = httpx.get(
        f"{lp_server.url}/api/v1/pop/queue/{q}", params={"wait": "true", "timeout": "5000"}
    )
    assert r.status_code == 200
    assert r.json()["messages"][0]["data"] == "x"


async def _many_long_polls(port: int, n: int, path: str) -> list[bytes]:
    async def one() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        status = await reader.readline()
        await reader.read()
        writer.close()
        return status

    return await asyncio.gather(*(one() for _ in range(n)))


def test_two_thousand_concurrent_long_polls_are_all_answered(lp_server: ServerProcess) -> None:
    path = f"/api/v1/pop/queue/{qname()}?wait=true&timeout=3000"
    statuses = asyncio.run(_many_long_polls(lp_server.port, 2000, path))
    assert len(statuses) == 2000
    assert all(s.startswith(b"HTTP/1.1 204") for s in statuses), set(statuses)


@pytest.mark.parametrize("count", ["1", "8"])
def test_poll_worker_counts_one_and_eight(migrated_dsn: str, count: str) -> None:
    with ServerProcess(migrated_dsn, workers=1, POLL_WORKER_COUNT=count) as srv:
        queues = [qname() for _ in range(6)]
        waiters = [Waiter(srv.url, q) for q in queues]
        for w in waiters:
            w.start()
        wait_registered(srv.url, len(waiters))
        for q in queues:
            push(srv.url, q, q)
        for w, q in zip(waiters, queues, strict=True):
            w.join(10)
            assert w.response is not None and w.response.status_code == 200
            assert w.response.json()["messages"][0]["data"] == q


def test_sigterm_answers_waiters_and_exits(migrated_dsn: str) -> None:
    srv = ServerProcess(migrated_dsn, workers=2).start()
    waiters = [Waiter(srv.url, qname(), timeout_ms=30000) for _ in range(4)]
    for w in waiters:
        w.start()
    wait_registered(srv.url, 4)
    stopped_at = time.monotonic()
    assert srv.stop() == 0
    for w in waiters:
        w.join(5)
        assert w.response is not None and w.response.status_code == 204
        assert w.answered_at - stopped_at < 1.5, "waiters answered within about a second"


def test_full_registry_answers_503_with_retry_after(migrated_dsn: str) -> None:
    with ServerProcess(migrated_dsn, workers=1, MAX_POLL_INTENTIONS="2") as srv:
        q = qname()
        waiters = [Waiter(srv.url, q, timeout_ms=3000) for _ in range(2)]
        for w in waiters:
            w.start()
        wait_registered(srv.url, 2)
        r = httpx.get(f"{srv.url}/api/v1/pop/queue/{q}", params={"wait": "true", "timeout": "3000"})
        assert r.status_code == 503
        assert r.headers["retry-after"] == "1"
        assert "long polls" in r.json()["error"]
        registry = httpx.get(f"{srv.url}/metrics").json()["longPolling"]["registry"]
        assert registry["rejected"] == 1
        for w in waiters:
            w.join(10)
            assert w.response is not None and w.response.status_code == 204


def test_a_long_poll_answer_keeps_its_connection(lp_server: ServerProcess) -> None:
    q = qname()
    sock = raw_long_poll(lp_server.port, f"/api/v1/pop/queue/{q}?wait=true&timeout=10000")
    wait_registered(lp_server.url, 1)
    push(lp_server.url, q, "first")
    head, body = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert b"x-request-id: " in head.lower() and b"access-control-allow-origin: *" in head.lower()
    assert httpx.Response(200, content=body).json()["messages"][0]["data"] == "first"
    # the same connection serves on: another long poll (to its deadline), then a plain GET
    sock.sendall(
        f"GET /api/v1/pop/queue/{q}?wait=true&timeout=200 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    head, body = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 204 ") and body == b""
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, body = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 200 ") and b'"healthy"' in body
    assert sock.recv(1) == b""
    sock.close()


def test_connection_close_is_honoured_after_a_long_poll_answer(lp_server: ServerProcess) -> None:
    sock = socket.create_connection(("127.0.0.1", lp_server.port))
    path = f"/api/v1/pop/queue/{qname()}?wait=true&timeout=200"
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    head, _ = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 204 ") and b"Connection: close" in head
    assert sock.recv(1) == b""
    sock.close()


def test_pipelined_requests_behind_a_long_poll_are_answered_in_order(
    lp_server: ServerProcess,
) -> None:
    sock = socket.create_connection(("127.0.0.1", lp_server.port))
    path = f"/api/v1/pop/queue/{qname()}?wait=true&timeout=300"
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    first, _ = read_answer(sock)
    second, body = read_answer(sock)
    assert first.startswith(b"HTTP/1.1 204 ")
    assert second.startswith(b"HTTP/1.1 200 ") and b'"healthy"' in body
    sock.close()


def test_names_with_colons_do_not_share_a_group(lp_server: ServerProcess) -> None:
    """Queue `X:b` partition `c` and queue `X` partition `b:c` are different groups: a
    waiter on the second is answered by a push to it, whoever registered first."""
    x = qname()
    first = Waiter(lp_server.url, f"{x}:b", timeout_ms=3000)
    first.url += "/partition/c"
    first.start()
    wait_registered(lp_server.url, 1)
    second = Waiter(lp_server.url, x, timeout_ms=8000)
    second.url += "/partition/b:c"
    second.start()
    wait_registered(lp_server.url, 2)
    pushed_at = time.monotonic()
    push(lp_server.url, x, "for b:c", partition="b:c")
    second.join(10)
    assert second.response is not None and second.response.status_code == 200
    assert second.response.json()["messages"][0]["data"] == "for b:c"
    assert second.answered_at - pushed_at < 1.0
    first.join(10)
    assert first.response is not None and first.response.status_code == 204


def test_a_queue_and_a_namespace_of_the_same_name_do_not_share_a_group(
    lp_server: ServerProcess,
) -> None:
    name = qname()
    r = httpx.post(
        f"{lp_server.url}/api/v1/configure",
        json={"queue": name, "namespace": "elsewhere", "options": {}},
    )
    assert r.status_code == 200, r.text
    by_namespace = Waiter(lp_server.url, "", timeout_ms=2000)
    by_namespace.url = f"{lp_server.url}/api/v1/pop"
    by_namespace.params["namespace"] = name
    by_namespace.start()
    wait_registered(lp_server.url, 1)
    by_queue = Waiter(lp_server.url, name, timeout_ms=8000)
    by_queue.start()
    wait_registered(lp_server.url, 2)
    pushed_at = time.monotonic()
    push(lp_server.url, name, "queue only")
    by_queue.join(10)
    assert by_queue.response is not None and by_queue.response.status_code == 200
    assert by_queue.response.json()["messages"][0]["data"] == "queue only"
    assert by_queue.answered_at - pushed_at < 1.0
    by_namespace.join(10)
    assert by_namespace.response is not None
    assert by_namespace.response.status_code == 204, "namespace waiter got the queue's message"
