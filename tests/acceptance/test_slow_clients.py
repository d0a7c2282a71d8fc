"""Slow and silent clients against the real gunicorn server (docs/security.md, "Slow and
silent clients"): hundreds of connections that never finish a request head, or never send
a byte, are closed at QUEEN_REQUEST_HEAD_TIMEOUT; a keep-alive connection that goes quiet is
closed at QUEEN_IDLE_CONNECTION_TIMEOUT; meanwhile pushes, pops and acks keep their usual
latency and a long poll longer than both bounds gets its answer."""

from __future__ import annotations

import selectors
import socket
import ssl
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.support.rawhttp import read_answer
from tests.support.server import ServerProcess
from tests.support.tls import self_signed

pytestmark = pytest.mark.serial  # asserts when connections close and how long requests take

HEAD_S = 2.0
IDLE_S = 3.0
MARGIN_S = 1.5  # a loaded machine's scheduling, on top of the bound
TRICKLE_EVERY_S = 1.0


@dataclass
class Hostile:
    """One client connection that holds the server up; `closed` is when the server let go."""

    sock: socket.socket
    kind: str  # "silent", "trickle" (one header line a second, never the blank line), "idle"
    since: float  # the bound counts from here: connected, or the last answer received
    closed: float | None = None
    lines: int = 0

    @property
    def held(self) -> float:
        assert self.closed is not None
        return self.closed - self.since


@dataclass
class Traffic:
    """A producer-consumer cycle repeated in a thread: push one message, pop it, ack it."""

    url: str
    queue: str = field(default_factory=lambda: f"slowc-{uuid.uuid4().hex[:10]}")
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def cycle(self, http: httpx.Client) -> None:
        start = time.monotonic()
        item = {"queue": self.queue, "payload": {"at": start}}
        assert http.post("/push", json={"items": [item]}).status_code == 201
        popped = http.get(f"/pop/queue/{self.queue}", params={"batch": 1})
        assert popped.status_code == 200, popped.status_code
        [message] = popped.json()["messages"]
        ack = {k: message[k] for k in ("transactionId", "partitionId", "leaseId")}
        assert http.post("/ack", json={**ack, "status": "completed"}).status_code == 200
        self.latencies.append(time.monotonic() - start)

    def run(self) -> None:
        # keep-alive, with an expiry below the server's idle bound (as httpx's 5 s default is
        # below the server's default 75 s)
        limits = httpx.Limits(keepalive_expiry=1.0)
        with httpx.Client(base_url=f"{self.url}/api/v1", timeout=10, limits=limits) as http:
            while not self.stop.is_set():
                try:
                    self.cycle(http)
                except (AssertionError, httpx.HTTPError) as exc:
                    self.errors.append(repr(exc))

    def cycles(self, count: int) -> list[float]:
        """Run `count` cycles now, in this thread; their latencies."""
        self.latencies = []
        with httpx.Client(base_url=f"{self.url}/api/v1", timeout=10) as http:
            for _ in range(count):
                self.cycle(http)
        return self.latencies


def open_hostile(port: int, kind: str, tls: ssl.SSLContext | None = None) -> Hostile:
    sock: socket.socket = socket.create_connection(("127.0.0.1", port), timeout=10)
    since = time.monotonic()  # the head bound includes the TLS handshake
    if tls is not None:
        sock = tls.wrap_socket(sock, server_hostname="localhost")
    if kind == "trickle":
        sock.sendall(b"POST /api/v1/push HTTP/1.1\r\nHost: queen\r\n")
    elif kind == "idle":
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: queen\r\n\r\n")
        head, _ = read_answer(sock, 10)
        assert head.startswith(b"HTTP/1.1 200"), head
        since = time.monotonic()
    sock.setblocking(False)
    return Hostile(sock, kind, since)


def wait_until_closed(hostiles: list[Hostile], deadline_s: float) -> None:
    """Wait (on the sockets, not on a clock) until the server has closed every one of them,
    or `deadline_s` passed; trickling connections send their next header line meanwhile."""
    selector = selectors.DefaultSelector()
    for h in hostiles:
        selector.register(h.sock, selectors.EVENT_READ, h)
    deadline = time.monotonic() + deadline_s
    next_line = time.monotonic() + TRICKLE_EVERY_S
    while selector.get_map() and time.monotonic() < deadline:
        for key, _ in selector.select(max(0.0, min(next_line, deadline) - time.monotonic())):
            h = key.data
            try:
                data = h.sock.recv(4096)
            except (BlockingIOError, ssl.SSLWantReadError):
                continue
            except OSError:  # reset: the server closed with our unread header in its buffer
                data = b""
            if not data:
                h.closed = time.monotonic()
                selector.unregister(h.sock)
                h.sock.close()
        if time.monotonic() >= next_line:
            next_line += TRICKLE_EVERY_S
            for h in hostiles:
                if h.kind == "trickle" and h.closed is None:
                    try:
                        h.sock.send(b"X-Trickle-%d: 1\r\n" % h.lines)
                        h.lines += 1
                    except (OSError, ssl.SSLWantWriteError):
                        pass  # the read side reports the close
    selector.close()


def long_poll(
    url: str, timeout_ms: int, verify: ssl.SSLContext | bool = True
) -> Callable[[], float]:
    """Start a long poll on an empty queue in a thread; the returned function waits for its
    204 and gives how long the poll took."""
    result: list[float] = []
    queue = f"slowc-lp-{uuid.uuid4().hex[:10]}"

    def poll() -> None:
        start = time.monotonic()
        r = httpx.get(
            f"{url}/api/v1/pop/queue/{queue}",
            params={"wait": "true", "timeout": timeout_ms},
            timeout=timeout_ms / 1000 + 10,
            verify=verify,
        )
        assert r.status_code == 204, r.status_code
        result.append(time.monotonic() - start)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()

    def answer() -> float:
        thread.join(timeout_ms / 1000 + 15)
        assert result, "the long poll got no 204"
        return result[0]

    return answer


@pytest.fixture(scope="module")
def srv(module_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(
        module_dsn,
        workers=2,
        QUEEN_REQUEST_HEAD_TIMEOUT=HEAD_S,
        QUEEN_IDLE_CONNECTION_TIMEOUT=IDLE_S,
    ) as server:
        yield server


def test_hostile_connections_are_closed_and_normal_requests_keep_their_latency(
    srv: ServerProcess,
) -> None:
    traffic = Traffic(srv.url)
    traffic.cycles(5)  # warm: the queue exists, each worker's pool has connections
    before = statistics.median(traffic.cycles(30))
    poll_answered = long_poll(srv.url, timeout_ms=int((HEAD_S + IDLE_S + 1) * 1000))

    hostiles = [open_hostile(srv.port, "idle") for _ in range(20)]
    hostiles += [open_hostile(srv.port, kind) for _ in range(150) for kind in ("silent", "trickle")]
    traffic.latencies = []
    runner = threading.Thread(target=traffic.run, daemon=True)
    runner.start()
    try:
        wait_until_closed(hostiles, deadline_s=IDLE_S + MARGIN_S + 5)
    finally:
        traffic.stop.set()
        runner.join(15)

    still_open = [h.kind for h in hostiles if h.closed is None]
    assert not still_open, f"{len(still_open)} not closed: {sorted(set(still_open))}"
    for kind, bound in (("silent", HEAD_S), ("trickle", HEAD_S), ("idle", IDLE_S)):
        held = sorted(h.held for h in hostiles if h.kind == kind)
        assert bound - 0.3 <= held[0] and held[-1] <= bound + MARGIN_S, (kind, held[0], held[-1])
    assert max(h.lines for h in hostiles) >= 1  # the tricklers did trickle

    assert not traffic.errors, traffic.errors[:5]
    during = traffic.latencies
    assert len(during) >= 20, len(during)
    # normal latency: the median cycle about as before (a shared machine: a generous factor)
    assert statistics.median(during) <= max(3 * before, before + 0.05), (before, during)
    assert max(during) < HEAD_S, max(during)  # none waited anything like a hostile's bound
    # a long poll longer than both bounds is not cut by them
    assert poll_answered() >= HEAD_S + IDLE_S + 1 - 0.2


def test_silent_and_trickling_tls_connections_are_closed(
    pg_admin_dsn: str, template_db: str, tmp_path: Path
) -> None:
    """Over TLS a silent client used to sit in the handshake for good (gevent's server does
    the handshake before gunicorn's loop starts). Now the handshake has the head bound."""
    from tests.conftest import database_from_template

    cert, key = self_signed(tmp_path)
    with (
        database_from_template(pg_admin_dsn, template_db) as dsn,
        ServerProcess(
            dsn,
            workers=1,
            SSL_CERTFILE=cert,
            SSL_KEYFILE=key,
            QUEEN_REQUEST_HEAD_TIMEOUT=HEAD_S,
            QUEEN_IDLE_CONNECTION_TIMEOUT=IDLE_S,
        ) as tls_srv,
    ):
        assert isinstance(tls_srv.verify, ssl.SSLContext)
        hostiles = [open_hostile(tls_srv.port, "silent") for _ in range(20)]  # no handshake
        hostiles += [open_hostile(tls_srv.port, "trickle", tls_srv.verify) for _ in range(20)]
        hostiles += [open_hostile(tls_srv.port, "idle", tls_srv.verify) for _ in range(5)]
        poll_answered = long_poll(tls_srv.url, int((HEAD_S + 1) * 1000), tls_srv.verify)
        wait_until_closed(hostiles, deadline_s=IDLE_S + MARGIN_S + 5)
        assert all(h.closed is not None for h in hostiles)
        for kind, bound in (("silent", HEAD_S), ("trickle", HEAD_S), ("idle", IDLE_S)):
            held = sorted(h.held for h in hostiles if h.kind == kind)
            assert bound - 0.3 <= held[0] and held[-1] <= bound + MARGIN_S, (kind, held)
        assert poll_answered() >= HEAD_S + 1 - 0.2
        r = httpx.get(f"{tls_srv.url}/health", verify=tls_srv.verify)
        assert r.status_code == 200
