"""The worker's deadlines on request heads, through gunicorn's own connection loop.

`QueenGeventWorker.handle` runs gunicorn's `AsyncWorker.handle` on real (gevent) sockets in
this process, with a tiny WSGI app: these tests fail if gunicorn stops reading request heads
inside `timeout_ctx()` (a silent or trickling client would then stay), or starts bounding
more than the head with it (a long poll would then be cut). No monkey patching: every
blocking call here is a gevent socket's. The real server: tests/acceptance/test_slow_clients.py.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import gevent
import gevent.event
import pytest
from gevent import socket
from gunicorn.config import Config
from gunicorn.glogging import Logger

from queen_threads.errors import ConfigError
from queen_threads.http.worker import QueenGeventWorker
from queen_threads.settings import load_settings

pytestmark = pytest.mark.serial  # asserts when a connection closes, to a fraction of a second

HEAD_S = 0.3
IDLE_S = 0.6
REQUEST = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"
WAITING = gevent.event.Event()  # set when the app starts serving /wait


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    if environ["PATH_INFO"] == "/wait":  # a long poll: the request is read, the answer waits
        WAITING.set()
        gevent.sleep(3 * IDLE_S)
    start_response("200 OK", [("Content-Length", "2")])
    return [b"ok"]


@pytest.fixture
def worker() -> Iterator[QueenGeventWorker]:
    cfg = Config()
    cfg.set("keepalive", 75)
    worker = QueenGeventWorker(0, os.getppid(), [], None, 30, cfg, Logger(cfg))
    worker.head_timeout, worker.idle_timeout = HEAD_S, IDLE_S
    worker.wsgi = app
    yield worker
    worker.tmp.close()  # the heartbeat file gunicorn's Worker opens


@pytest.fixture
def connect(worker: QueenGeventWorker) -> Iterator[Callable[[], socket.socket]]:
    """A client socket whose server end is served by the worker's handle() in a greenlet."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    handlers: list[gevent.Greenlet] = []

    def open_one() -> socket.socket:
        client = socket.create_connection(listener.getsockname())
        conn, addr = listener.accept()
        handlers.append(gevent.spawn(worker.handle, listener, conn, addr))
        return client

    yield open_one
    gevent.killall(handlers, timeout=2)
    listener.close()


def closed_after(client: socket.socket, limit: float = 5.0) -> float:
    """Seconds until the server closes `client` (reading and dropping anything it sends)."""
    start = time.monotonic()
    with gevent.Timeout(limit):
        while client.recv(4096):
            pass
    return time.monotonic() - start


def answer(client: socket.socket, request: bytes = REQUEST) -> bytes:
    client.sendall(request)
    data = b""
    with gevent.Timeout(5):
        while not data.endswith(b"ok"):
            chunk = client.recv(4096)
            assert chunk, f"closed after {data!r}"
            data += chunk
    return data.split(b"\r\n", 1)[0]


def test_a_silent_connection_is_closed_at_the_head_bound(
    connect: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "queen_threads.http")
    assert HEAD_S - 0.05 <= closed_after(connect()) < HEAD_S + 0.5
    gevent.sleep(0)  # the handler's last step, after the close
    assert caplog.messages[-1].endswith(": no complete request head"), caplog.messages


def test_a_trickled_head_is_closed_at_the_head_bound(connect: Any) -> None:
    client = connect()
    start = time.monotonic()
    client.sendall(b"GET /x HTTP/1.1\r\n")

    def trickle() -> None:
        for n in range(100):
            gevent.sleep(HEAD_S / 6)
            client.sendall(b"X-%d: 1\r\n" % n)

    trickler = gevent.spawn(trickle)
    closed_after(client)
    trickler.kill()
    assert HEAD_S - 0.05 <= time.monotonic() - start < HEAD_S + 0.5


def test_keep_alive_waits_the_idle_bound_then_closes(
    connect: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "queen_threads.http")
    client = connect()
    assert answer(client) == b"HTTP/1.1 200 OK"
    gevent.sleep(0.75 * IDLE_S)  # longer than HEAD_S: silence between requests is no head
    assert answer(client) == b"HTTP/1.1 200 OK"
    assert IDLE_S - 0.05 <= closed_after(client) < IDLE_S + 0.5
    gevent.sleep(0)
    assert caplog.messages[-1].endswith(": idle keep-alive"), caplog.messages


def test_the_next_head_has_the_head_bound_from_its_first_byte(connect: Any) -> None:
    client = connect()
    assert answer(client) == b"HTTP/1.1 200 OK"
    gevent.sleep(0.75 * IDLE_S)
    client.sendall(b"GET /x HTTP/1.1\r\n")  # the idle bound would end it 0.15 s from here
    assert HEAD_S - 0.05 <= closed_after(client) < HEAD_S + 0.5


def test_a_request_already_read_is_not_cut(connect: Any) -> None:
    client = connect()
    start = time.monotonic()
    assert answer(client, b"GET /wait HTTP/1.1\r\nHost: t\r\n\r\n") == b"HTTP/1.1 200 OK"
    assert time.monotonic() - start >= 3 * IDLE_S
    assert answer(client) == b"HTTP/1.1 200 OK"  # and the connection serves the next one


def test_a_stopping_worker_closes_idle_keep_alive_connections_and_finishes_requests(
    worker: QueenGeventWorker, connect: Any
) -> None:
    idle, busy = connect(), connect()
    assert answer(idle) == b"HTTP/1.1 200 OK"
    WAITING.clear()
    busy.sendall(b"GET /wait HTTP/1.1\r\nHost: t\r\n\r\n")
    assert WAITING.wait(5)  # the worker has read the long request
    worker.alive = False  # what SIGTERM does; gunicorn's drain loop calls notify() each second
    worker.notify()
    assert closed_after(idle) < 0.2  # not at the idle bound
    start = time.monotonic()
    with gevent.Timeout(5):
        head = busy.recv(4096)
    assert head.startswith(b"HTTP/1.1 200 OK"), head
    assert time.monotonic() - start >= 3 * IDLE_S - 0.3  # answered in full, not cut


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "nan", "inf", "1e9"])
@pytest.mark.parametrize("name", ["QUEEN_REQUEST_HEAD_TIMEOUT", "QUEEN_IDLE_CONNECTION_TIMEOUT"])
def test_a_malformed_bound_stops_the_start_naming_the_variable(name: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=rf"^invalid {name}: "):
        load_settings({name: raw}, dotenv_path=None)


def test_the_bounds_default_to_10_and_75_seconds_and_take_fractions() -> None:
    s = load_settings({}, dotenv_path=None)
    assert (s.request_head_timeout_s, s.idle_connection_timeout_s) == (10.0, 75.0)
    s = load_settings({"QUEEN_REQUEST_HEAD_TIMEOUT": "2.5"}, dotenv_path=None)
    assert s.request_head_timeout_s == 2.5
