"""Streams (windowed consumption) against the real gunicorn -k gevent server, over plain HTTP.

One server with 2 worker processes serves the module. Its stream poll workers look for a
group's window only every 20 s (STREAM_POLL_INTERVAL = STREAM_MAX_POLL_INTERVAL = 20000):
a waiting stream poll answered promptly can only have been woken, by a push into a source
queue or an ack of its group, in its own process or, through LISTEN/NOTIFY, in the other.

Time windows are aligned to the epoch over the messages' created_at (the database clock,
on this host the same clock as `time.time()`), so the tests wait for a window boundary in
wall-clock time where a window must end; everything else is awaited as a condition.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.support.rawhttp import read_answer
from tests.support.server import ServerProcess

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)

WORKERS = 2
SLOW_STREAM_POLLING = {"STREAM_POLL_INTERVAL": "20000", "STREAM_MAX_POLL_INTERVAL": "20000"}
# A waiter answered at its deadline returns within this much of it (the stream workers tick
# every 100 ms; 50 client threads share 2 cores with the server).
DEADLINE_EARLY_S = 0.05
DEADLINE_LATE_S = 0.5


@pytest.fixture(scope="module")
def srv(module_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(module_dsn, workers=WORKERS, **SLOW_STREAM_POLLING) as server:
        yield server


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def post(url: str, path: str, body: dict[str, Any], expect: int = 200) -> Any:
    r = httpx.post(f"{url}/api/v1{path}", json=body, timeout=15)
    assert r.status_code == expect, r.text
    return r.json()


def configure(url: str, queue: str) -> None:
    post(url, "/configure", {"queue": queue, "options": {}})


def define(url: str, stream: str, queues: list[str], **options: Any) -> dict[str, Any]:
    body = {"name": stream, "source_queue_names": queues, **options}
    result: dict[str, Any] = post(url, "/stream/define", body, expect=201)["stream"]
    return result


def push(url: str, queue: str, payload: Any, partition: str = "Default") -> datetime:
    """Push one message; its created_at (read back from the server)."""
    [created] = push_items(url, [{"queue": queue, "partition": partition, "payload": payload}])
    return created


def push_items(url: str, items: list[dict[str, Any]]) -> list[datetime]:
    """Push messages in one request; their created_at (read back from the server)."""
    results = post(url, "/push", {"items": items}, expect=201)
    created = []
    for pushed in results:
        assert pushed["status"] == "queued", pushed
        r = httpx.get(f"{url}/api/v1/messages/{pushed['partition_id']}/{pushed['transactionId']}")
        assert r.status_code == 200, r.text
        created.append(parse(r.json()["createdAt"]))
    return created


def parse(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def epoch_ms(at: datetime) -> int:
    return round(at.timestamp() * 1000)


def window_end(created: datetime, duration_ms: int) -> int:
    """The end (epoch ms) of the tumbling window holding `created`."""
    return (epoch_ms(created) // duration_ms + 1) * duration_ms


def wait_until_wall_clock(at_ms: int) -> None:
    """Sleep until time.time() is 10 ms past `at_ms`: waiting for a window boundary."""
    delay = at_ms / 1000 + 0.01 - time.time()
    if delay > 0:
        time.sleep(delay)


def next_boundary(duration_ms: int) -> int:
    return (int(time.time() * 1000) // duration_ms + 1) * duration_ms


class StreamWaiter(threading.Thread):
    """One long stream poll on its own connection; with `ack`, acks its window at once."""

    def __init__(
        self, url: str, stream: str, group: str, timeout_ms: int = 10000, ack: bool = False
    ) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.body = {"streamName": stream, "consumerGroup": group, "timeout": timeout_ms}
        self.timeout_s = timeout_ms / 1000
        self.ack = ack
        self.response: httpx.Response | None = None
        self.started_at = 0.0
        self.answered_at = 0.0
        self.acked: dict[str, Any] | None = None
        # Built here, not in the thread: fifty threads building TLS contexts at once would
        # delay their requests by up to a second.
        self.client = httpx.Client(timeout=self.timeout_s + 10)

    def run(self) -> None:
        with self.client:
            self.started_at = time.monotonic()
            self.response = self.client.post(f"{self.url}/api/v1/stream/poll", json=self.body)
        self.answered_at = time.monotonic()
        if self.ack and self.response.status_code == 200:
            lease = self.response.json()["window"]["leaseId"]
            self.acked = post(self.url, "/stream/ack", {"leaseId": lease})

    @property
    def status(self) -> int:
        assert self.response is not None, "no answer"
        return self.response.status_code

    @property
    def window(self) -> dict[str, Any]:
        assert self.response is not None and self.response.status_code == 200
        result: dict[str, Any] = self.response.json()["window"]
        return result


def waiting_by_process(url: str) -> dict[int, int]:
    """Waiting stream polls of each worker process ({pid: count}).

    `waitingPolls` of /resources/streams/stats is the answering process's own registry; a
    keep-alive connection stays with one process, so /health on the same connection names
    it. New connections until every worker process has been heard from."""
    seen: dict[int, int] = {}
    for _ in range(200):
        with httpx.Client(base_url=url, timeout=5) as client:
            pid = client.get("/health").json()["worker_id"]
            seen[pid] = client.get("/api/v1/resources/streams/stats").json()["waitingPolls"]
        if len(seen) == WORKERS:
            return seen
    raise AssertionError(f"heard from {len(seen)} of {WORKERS} worker processes")


def wait_waiting(url: str, count: int, timeout: float = 15.0) -> dict[int, int]:
    """Until exactly `count` stream polls wait over the server's processes."""
    deadline = time.monotonic() + timeout
    seen: dict[int, int] = {}
    while time.monotonic() < deadline:
        seen = waiting_by_process(url)
        if sum(seen.values()) == count:
            return seen
        time.sleep(0.05)
    raise AssertionError(f"expected {count} waiting stream polls, saw {seen}")


def start_all(waiters: list[StreamWaiter]) -> None:
    for w in waiters:
        w.start()


def join_all(waiters: list[StreamWaiter], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    for w in waiters:
        w.join(max(0.0, deadline - time.monotonic()))
    hanging = [w for w in waiters if w.is_alive()]
    assert not hanging, f"{len(hanging)} stream polls never answered"


def assert_answered_at_deadline(w: StreamWaiter) -> None:
    assert w.status == 204, w.response.text if w.response else None
    assert w.response is not None and w.response.content == b""
    elapsed = w.answered_at - w.started_at
    assert w.timeout_s - DEADLINE_EARLY_S <= elapsed <= w.timeout_s + DEADLINE_LATE_S, (
        f"204 after {elapsed:.3f}s for a {w.timeout_s}s timeout"
    )


# -- (a) a push past the window's end answers a waiting poll ------------------------------
def test_waiting_poll_is_answered_by_the_push_that_completes_its_window(
    srv: ServerProcess,
) -> None:
    q, stream = name("sa-q"), name("sa-s")
    configure(srv.url, q)
    define(srv.url, stream, [q], window_type="tumbling", window_duration_ms=1000,
           window_grace_period_ms=0)  # fmt: skip
    created = push(srv.url, q, {"n": 1})
    end = window_end(created, 1000)
    waiter = StreamWaiter(srv.url, stream, "g", timeout_ms=10000)
    waiter.start()
    wait_waiting(srv.url, 1)
    wait_until_wall_clock(end)  # the window has ended; it is ready once a later push lands
    assert waiter.is_alive(), "answered before the window could be ready"
    pushed_at = time.monotonic()
    push(srv.url, q, {"n": 2})
    join_all([waiter], 15)
    assert waiter.status == 200, waiter.response.text if waiter.response else None
    window = waiter.window
    assert epoch_ms(parse(window["end"])) == end
    assert epoch_ms(parse(window["start"])) == end - 1000
    assert [m["data"] for m in window["messages"]] == [{"n": 1}]
    assert window["key"] == "__GLOBAL__" and window["deliveryCount"] == 1
    assert waiter.answered_at > pushed_at
    assert waiter.answered_at - pushed_at < 1.0, "woken by the push"
    assert waiter.answered_at - waiter.started_at < 5.0, "well before its 10 s deadline"


# -- (b) each window goes to exactly one waiter of the group -------------------------------
def test_fifty_waiters_of_a_partitioned_stream_get_one_window_per_partition(
    srv: ServerProcess,
) -> None:
    q, stream = name("sb-q"), name("sb-s")
    configure(srv.url, q)
    define(srv.url, stream, [q], partitioned=True, window_type="tumbling",
           window_duration_ms=1000, window_grace_period_ms=0)  # fmt: skip
    partitions = [f"p{i}" for i in range(5)]
    # One request, well inside one window (five requests that each create a partition can
    # take longer than a window on a loaded machine, on Citus in particular).
    wait_until_wall_clock(next_boundary(1000))
    items = [{"queue": q, "partition": p, "payload": {"p": p}} for p in partitions]
    ends = {window_end(created, 1000) for created in push_items(srv.url, items)}
    assert len(ends) == 1, "the five messages fell in one window"
    waiters = [StreamWaiter(srv.url, stream, "g", timeout_ms=4000) for _ in range(50)]
    start_all(waiters)
    wait_waiting(srv.url, 50)
    wait_until_wall_clock(ends.pop())
    # The queue's watermark passes the window's end: every partition's window is ready.
    pushed_at = time.monotonic()
    push(srv.url, q, {"p": "late"}, partition="p0")
    join_all(waiters)
    answered = [w for w in waiters if w.status == 200]
    assert len(answered) == 5
    keys = {w.window["key"] for w in answered}
    ids = {w.window["id"] for w in answered}
    assert len(keys) == 5 and len(ids) == 5, "five distinct windows, one per partition"
    assert sorted(m["data"]["p"] for w in answered for m in w.window["messages"]) == partitions
    for w in answered:
        [message] = w.window["messages"]
        assert w.window["key"] == message["partitionId"]
        assert w.answered_at - pushed_at < 1.0, "woken by the push"
    for w in waiters:
        if w.status != 200:
            assert_answered_at_deadline(w)
    assert sum(waiting_by_process(srv.url).values()) == 0


def test_windows_of_one_key_go_to_one_waiter_at_a_time_in_order(srv: ServerProcess) -> None:
    """Five ready windows of the __GLOBAL__ key, ten waiters acking at once: every ack wakes
    the group (in the other process too), so the windows go out one after another."""
    q, stream = name("sc-q"), name("sc-s")
    configure(srv.url, q)
    define(srv.url, stream, [q], window_type="tumbling", window_duration_ms=200,
           window_grace_period_ms=0)  # fmt: skip
    starts = []
    for n in range(5):  # one message in each of five consecutive-or-later windows
        wait_until_wall_clock(next_boundary(200))
        starts.append(window_end(push(srv.url, q, {"n": n}), 200) - 200)
    wait_until_wall_clock(starts[-1] + 200)
    push(srv.url, q, {"n": "late"})  # the watermark passes the fifth window's end
    waiters = [StreamWaiter(srv.url, stream, "g", timeout_ms=5000, ack=True) for _ in range(10)]
    start_all(waiters)
    join_all(waiters)
    answered = sorted((w for w in waiters if w.status == 200), key=lambda w: w.answered_at)
    assert len(answered) == 5, "five windows, five different waiters"
    assert [epoch_ms(parse(w.window["start"])) for w in answered] == starts
    assert [[m["data"]["n"] for m in w.window["messages"]] for w in answered] == [
        [n] for n in range(5)
    ]
    assert all(w.acked is not None and w.acked["acknowledged"] for w in answered)
    for w in waiters:
        if w.status != 200:
            assert_answered_at_deadline(w)
    # Woken by the acks, not by the 20 s polling: all five out long before any deadline.
    assert answered[-1].answered_at - answered[0].answered_at < 3.0
    consumers = httpx.get(f"{srv.url}/api/v1/resources/streams/{stream}/consumers").json()
    [key] = consumers["consumers"]
    assert key["windowsAcked"] == 5 and key["lease"] is None


# -- (c) a push handled by one process wakes the waiters of the other ----------------------
def test_push_wakes_waiters_in_every_worker_process(srv: ServerProcess) -> None:
    q, stream = name("sd-q"), name("sd-s")
    configure(srv.url, q)
    define(srv.url, stream, [q], window_type="tumbling", window_duration_ms=1000,
           window_grace_period_ms=0)  # fmt: skip
    end = window_end(push(srv.url, q, "first"), 1000)
    # One group per waiter: every waiter is owed the window. The kernel spreads new
    # connections over the processes; more waiters join until every process holds some.
    waiters: list[StreamWaiter] = []
    by_process: dict[int, int] = {}
    while not by_process or not all(by_process.values()):
        assert len(waiters) < 128, f"waiters never reached every process: {by_process}"
        more = [StreamWaiter(srv.url, stream, f"g{len(waiters) + i}", timeout_ms=15000)
                for i in range(8)]  # fmt: skip
        start_all(more)
        waiters += more
        by_process = wait_waiting(srv.url, len(waiters))
    wait_until_wall_clock(end)
    pushed_at = time.monotonic()
    push(srv.url, q, "second")  # handled by one process; the other hears NOTIFY
    join_all(waiters)
    for w in waiters:
        assert w.status == 200
        assert [m["data"] for m in w.window["messages"]] == ["first"]
        assert w.answered_at - pushed_at < 1.0, "woken across processes within 1 s"


# -- (d) a departed client does not strand its window --------------------------------------
def raw_stream_poll(port: int, body: dict[str, Any]) -> socket.socket:
    data = httpx.Request("POST", "http://x/", json=body).read()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        b"POST /api/v1/stream/poll HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return sock


def test_window_taken_for_departed_clients_goes_to_the_next_poll(srv: ServerProcess) -> None:
    q, stream = name("se-q"), name("se-s")
    configure(srv.url, q)
    # A 10-minute lease: a stranded window would block the group for the whole test.
    define(srv.url, stream, [q], window_type="tumbling", window_duration_ms=1000,
           window_grace_period_ms=0, window_lease_timeout_ms=600000)  # fmt: skip
    end = window_end(push(srv.url, q, "kept"), 1000)
    body = {"streamName": stream, "consumerGroup": "g", "timeout": 20000}
    socks = [raw_stream_poll(srv.port, body) for _ in range(4)]
    wait_waiting(srv.url, 4)
    wait_until_wall_clock(end)
    # The clients leave as the window becomes ready: whichever poll it was leased for
    # gives it back (the poll is withdrawn, or its unwritten answer releases the lease).
    for s in socks:
        s.close()
    push(srv.url, q, "late")
    wait_waiting(srv.url, 0)
    r = httpx.post(f"{srv.url}/api/v1/stream/poll", json={**body, "timeout": 5000}, timeout=15)
    assert r.status_code == 200, r.text
    window = r.json()["window"]
    assert [m["data"] for m in window["messages"]] == ["kept"]
    assert window["deliveryCount"] >= 1


def test_a_stream_poll_answer_keeps_its_connection(srv: ServerProcess) -> None:
    q, stream = name("sf-q"), name("sf-s")
    configure(srv.url, q)
    define(srv.url, stream, [q], window_type="count", window_size_count=2)
    sock = raw_stream_poll(srv.port, {"streamName": stream, "consumerGroup": "g",
                                      "timeout": 10000})  # fmt: skip
    wait_waiting(srv.url, 1)
    post(srv.url, "/push", {"items": [{"queue": q, "payload": i} for i in range(2)]}, 201)
    head, body = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 200 ")
    window = httpx.Response(200, content=body).json()["window"]
    assert [m["data"] for m in window["messages"]] == [0, 1]
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, body = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 200 ") and b'"healthy"' in body
    sock.close()
