"""Parked long polls over real socket pairs: the answer's bytes, keep-alive, departed clients.

(The whole path through gunicorn is covered by tests/acceptance/test_long_poll.py.)
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from types import SimpleNamespace
from typing import Any

import gevent
import pytest
from gevent import socket as gsocket

from queen_threads.http import parking
from queen_threads.http.parking import ParkedPoll, ParkingLot
from queen_threads.polling import PollIntention, Response
from queen_threads.polling.testing import make_intention
from tests.support.rawhttp import read_answer

HEADERS = parking.response_headers([("Access-Control-Allow-Origin", "*")])


class FakePolling:
    def __init__(self, paused: bool = False) -> None:
        self.withdrawn: list[str] = []
        self.released: list[str] = []
        self.paused = paused

    def withdraw(self, intention: PollIntention) -> None:
        self.withdrawn.append(intention.request_id)

    def release(self, lease_ids: Iterable[str]) -> None:
        self.released.extend(lease_ids)

    def pop_paused(self) -> bool:
        return self.paused


class Served:
    def __init__(self) -> None:
        self.sockets: list[Any] = []

    def __call__(self, sock: Any, addr: Any) -> None:
        self.sockets.append(sock)


@pytest.fixture
def pair() -> Iterator[tuple[Any, Any]]:
    server, client = gsocket.socketpair()
    yield server, client
    for s in (server, client):
        s.close()


def parked_poll(
    lot: ParkingLot, sock: Any, polling: FakePolling, keep_alive: bool = True
) -> tuple[ParkedPoll, list[tuple[Any, ...]]]:
    lines: list[tuple[Any, ...]] = []
    parked = ParkedPoll(lot, sock, keep_alive)
    parked.bind(polling, make_intention("r1", queue="q"))
    parked.describe("GET", "/api/v1/pop/queue/q", "req-1", 0.0, HEADERS, lambda *a: lines.append(a))
    return parked, lines


def read_response(sock: Any) -> bytes:
    head, body = read_answer(sock, timeout=5)
    return head + b"\r\n\r\n" + body


def test_an_answer_is_written_and_the_connection_served_on(pair: tuple[Any, Any]) -> None:
    server, client = pair
    lot, served, polling = ParkingLot(), Served(), FakePolling()
    lot.install(served)
    parked, lines = parked_poll(lot, server, polling)
    parked.start()
    parked.answer(Response(200, b'{"messages":[1]}', ("lease-1",)))
    assert lot.wait(5)
    data = read_response(client)
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nConnection: keep-alive\r\n" in data
    assert b"\r\nAccess-Control-Allow-Origin: *\r\n" in data
    assert b"\r\nx-request-id: req-1\r\n" in data
    assert b"\r\ncontent-type: application/json\r\ncontent-length: 16\r\n\r\n" in data
    assert data.endswith(b'{"messages":[1]}')
    assert len(served.sockets) == 1 and polling.released == []
    assert [line[2] for line in lines] == [200]
    served.sockets[0].close()


def test_an_answer_before_start_waits_for_it(pair: tuple[Any, Any]) -> None:
    server, client = pair
    lot, polling = ParkingLot(), FakePolling()
    lot.install(Served())
    parked, _ = parked_poll(lot, server, polling, keep_alive=False)
    parked.answer(Response(204, None, ()))
    gevent.sleep(0.01)
    client.setblocking(False)
    with pytest.raises(BlockingIOError):
        client.recv(1)  # nothing written while gunicorn still owns the connection
    client.setblocking(True)
    parked.start()
    assert lot.wait(5)
    data = read_response(client)
    assert data.startswith(b"HTTP/1.1 204 No Content\r\n")
    assert b"\r\nConnection: close\r\n" in data and b"content-length" not in data
    assert client.recv(10) == b""  # closed, not served on


def test_a_client_gone_while_parked_is_withdrawn(pair: tuple[Any, Any]) -> None:
    server, client = pair
    lot, polling = ParkingLot(), FakePolling()
    lot.install(Served())
    parked, lines = parked_poll(lot, server, polling)
    parked.start()
    client.close()
    with gevent.Timeout(5):
        while not polling.withdrawn:
            gevent.sleep(0.01)
    assert polling.withdrawn == ["r1"]
    assert [line[2] for line in lines] == [parking.GONE]
    # a poll worker that had already popped for it: the answer's leases go back
    parked.answer(Response(200, b"{}", ("lease-9",)))
    assert lot.wait(5)
    assert polling.released == ["lease-9"]


def test_messages_are_not_sent_while_pop_is_paused(pair: tuple[Any, Any]) -> None:
    server, client = pair
    lot, polling = ParkingLot(), FakePolling(paused=True)
    lot.install(Served())
    parked, _ = parked_poll(lot, server, polling)
    parked.start()
    parked.answer(Response(200, b"{}", ("lease-1",)))
    assert lot.wait(5)
    assert read_response(client).startswith(b"HTTP/1.1 204 ")
    assert polling.released == ["lease-1"]


def test_after_close_connections_are_closed_not_served_on(pair: tuple[Any, Any]) -> None:
    server, client = pair
    lot, served, polling = ParkingLot(), Served(), FakePolling()
    lot.install(served)
    parked, _ = parked_poll(lot, server, polling)
    parked.start()
    lot.closing = True  # SIGTERM
    parked.answer(Response(204, None, ()))
    assert lot.close(5)
    assert b"\r\nConnection: close\r\n" in read_response(client)
    assert served.sockets == []


def environ(**extra: Any) -> dict[str, Any]:
    buffered = io.BytesIO()
    unreader = SimpleNamespace(buf=buffered)
    env: dict[str, Any] = {
        "gunicorn.socket": object(),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.input": SimpleNamespace(reader=SimpleNamespace(unreader=unreader)),
    }
    env.update(extra)
    return env


def test_prepare_only_where_the_connection_can_be_taken_over() -> None:
    lot = ParkingLot()
    assert parking.prepare(environ(), lot) is None  # not under gunicorn
    lot.install(Served())
    assert parking.prepare(environ(), lot) is not None
    assert parking.prepare(environ(SERVER_PROTOCOL="HTTP/2"), lot) is None
    del_socket = environ()
    del del_socket["gunicorn.socket"]
    assert parking.prepare(del_socket, lot) is None
    pipelined = environ()
    pipelined["wsgi.input"].reader.unreader.buf.write(b"GET /health HTTP/1.1\r\n")
    assert parking.prepare(pipelined, lot) is None
    assert parking.prepare(environ(**{"wsgi.input": object()}), lot) is None  # unknown
    lot.closing = True
    assert parking.prepare(environ(), lot) is None


@pytest.mark.parametrize(
    ("protocol", "connection", "keep"),
    [
        ("HTTP/1.1", "", True),
        ("HTTP/1.1", "close", False),
        ("HTTP/1.1", "Keep-Alive, Upgrade", True),
        ("HTTP/1.0", "", False),
        ("HTTP/1.0", "keep-alive", True),
    ],
)
def test_keep_alive_follows_the_request(protocol: str, connection: str, keep: bool) -> None:
    lot = ParkingLot()
    lot.install(Served())
    parked = parking.prepare(environ(SERVER_PROTOCOL=protocol, HTTP_CONNECTION=connection), lot)
    assert parked is not None and parked.keep_alive is keep


def test_the_wsgi_wrapper_hands_a_parked_request_over() -> None:
    started: list[str] = []

    class Parked:
        def start(self) -> None:
            started.append("start")

        def abandon(self) -> None:
            started.append("abandon")

    def falcon_app(env: dict[str, Any], start_response: Any) -> list[bytes]:
        if env.get("park"):
            env[parking.ENVIRON_KEY] = Parked()
        if env.get("fail"):
            env[parking.ENVIRON_KEY] = Parked()
            raise RuntimeError("boom")
        return [b"ok"]

    app = parking.handing_over(falcon_app)
    assert app({}, None) == [b"ok"]
    with pytest.raises(StopIteration):
        app({"park": True}, None)
    with pytest.raises(RuntimeError):
        app({"fail": True}, None)
    assert started == ["start", "abandon"]


def test_an_abandoned_request_gives_back_an_answer_it_could_not_send(
    pair: tuple[Any, Any],
) -> None:
    server, _ = pair
    lot, polling = ParkingLot(), FakePolling()
    lot.install(Served())
    parked, _ = parked_poll(lot, server, polling)
    parked.answer(Response(200, b"{}", ("lease-3",)))  # before start(): kept pending
    parked.abandon()  # the request failed after registering: never started
    assert polling.withdrawn == ["r1"] and polling.released == ["lease-3"]


def test_leases_of_an_answer_without_messages_are_released(pair: tuple[Any, Any]) -> None:
    server, client = pair
    lot, polling = ParkingLot(), FakePolling()
    lot.install(Served())
    parked, _ = parked_poll(lot, server, polling, keep_alive=False)
    parked.start()
    parked.answer(Response(200, None, ("lease-7",)))
    assert lot.wait(5)
    assert read_response(client).startswith(b"HTTP/1.1 204 ")
    assert polling.released == ["lease-7"]
