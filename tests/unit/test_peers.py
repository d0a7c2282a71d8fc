from __future__ import annotations

import os
import queue
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest

from queen_threads.embedded import free_port
from queen_threads.errors import ConfigError, ValidationError
from queen_threads.settings import load_settings
from queen_threads.wake.peer_auth import PeerAuth
from queen_threads.wake.peer_sender import TIMEOUT_S
from queen_threads.wake.peers import (
    PeerService,
    SiblingBus,
    from_wire,
    is_self,
    to_wire,
    udp_address,
)
from tests.support.blackhole import BlackHole


def test_wire_round_trip_of_push_and_free() -> None:
    push = {"kind": "push", "queue": "q", "partition": "p", "consumerGroup": None}
    assert from_wire(to_wire(push)) == push
    free = {"kind": "free", "queue": "q", "partition": "p", "consumerGroup": "g"}
    wire = to_wire(free)
    assert wire["type"] == "partition_free" and wire["consumer_group"] == "g"
    assert from_wire(wire) == free


def test_heartbeat_is_ignored_and_bad_bodies_rejected() -> None:
    assert from_wire({"type": "heartbeat"}) is None
    for bad in ([], {"type": "x", "queue": "q"}, {"type": "message_available"},
                {"type": "message_available", "queue": "q", "partition": 3}):  # fmt: skip
        with pytest.raises(ValidationError):
            from_wire(bad)


def test_self_detection_and_udp_addresses() -> None:
    assert is_self("http://localhost:6632", "0.0.0.0", 6632)
    assert is_self("127.0.0.1:6632", "0.0.0.0", 6632)
    assert not is_self("http://localhost:6633", "0.0.0.0", 6632)
    assert not is_self("http://other-host:6632", "0.0.0.0", 6632)
    assert udp_address("10.0.0.5", 6633) == ("10.0.0.5", 6633)
    assert udp_address("http://peer:7000", 6633) == ("peer", 7000)


# -- peer secret, UDP bind, concurrent senders ------------------------------------------------
def test_udp_tag_round_trip_and_forgeries_are_refused() -> None:
    auth = PeerAuth("s3cret")
    body = orjson.dumps({"type": "message_available", "queue": "q"})
    signed = auth.sign(body)
    assert signed.startswith(body) and len(signed) == len(body) + 32
    assert auth.open(signed) == body
    assert auth.open(body) is None  # unsigned
    assert auth.open(PeerAuth("other").sign(body)) is None  # another key
    assert auth.open(signed.replace(b'"q"', b'"r"')) is None  # tampered payload
    assert auth.open(b"short") is None
    open_auth = PeerAuth("")
    assert open_auth.sign(body) == body and open_auth.open(body) == body


def test_http_secret_header_check() -> None:
    auth = PeerAuth("s3cret")
    assert auth.headers() == {"X-Queen-Peer-Secret": "s3cret"}
    assert auth.check_header("s3cret") is None
    assert auth.check_header(None) == "missing" and auth.check_header("") == "missing"
    assert auth.check_header("s3cre") == "wrong"
    assert PeerAuth("").check_header(None) is None and PeerAuth("").headers() == {}


def test_closed_without_a_secret_refuses_everything_inbound() -> None:
    """JWT_ENABLED closes the open default: only the peer secret opens the peer paths."""
    closed = PeerAuth("", closed=True)
    body = orjson.dumps({"type": "message_available", "queue": "q"})
    assert closed.check_header(None) == "unset" and closed.check_header("anything") == "unset"
    assert closed.open(body) is None
    assert closed.sign(body) == body  # what it sends is unchanged
    with_secret = PeerAuth("s3cret", closed=True)
    assert with_secret.check_header("s3cret") is None
    assert with_secret.open(with_secret.sign(body)) == body


def test_peer_settings() -> None:
    s = load_settings({}, dotenv_path=None)
    assert (s.peer_secret, s.udp_bind) == ("", "127.0.0.1")
    s = load_settings(
        {"QUEEN_PEER_SECRET": " abc!~ ", "QUEEN_UDP_BIND": "0.0.0.0"}, dotenv_path=None
    )
    assert (s.peer_secret, s.udp_bind) == ("abc!~", "0.0.0.0")
    with pytest.raises(ConfigError, match="invalid QUEEN_PEER_SECRET"):
        load_settings({"QUEEN_PEER_SECRET": "two words"}, dotenv_path=None)


class LivePeer:
    """A peer that answers at once and records what arrives (and when)."""

    def __init__(self) -> None:
        self.arrivals: queue.Queue[tuple[float, dict[str, str], bytes]] = queue.Queue()
        arrivals = self.arrivals

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                arrivals.put((time.monotonic(), dict(self.headers), body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def live_peer() -> Iterator[LivePeer]:
    peer = LivePeer()
    yield peer
    peer.close()


@pytest.fixture
def make_service() -> Iterator[Callable[..., PeerService]]:
    made: list[PeerService] = []

    def make(**kwargs: Any) -> PeerService:
        options: dict[str, Any] = {
            "http_peers": (),
            "udp_peers": (),
            "udp_port": free_port(),
            "batch_ms": 0,
            "host": "127.0.0.1",
            "port": free_port(),
        }
        options.update(kwargs)
        apply = options.pop("apply", lambda event, source: None)
        service = PeerService(apply, **options)
        service.start()
        made.append(service)
        return service

    yield make
    for service in made:
        service.stop()


PUSH = {"kind": "push", "queue": "q", "partition": "p", "consumerGroup": None}


def test_a_dead_peer_does_not_delay_a_live_one(
    live_peer: LivePeer, make_service: Callable[..., PeerService]
) -> None:
    with BlackHole() as dead:  # listed first: a one-after-another sender would wait on it
        service = make_service(http_peers=(dead.url, live_peer.url), secret="s3cret")
        for n in range(3):
            offered = time.monotonic()
            service({**PUSH, "queue": f"q{n}"})
            arrived, headers, body = live_peer.arrivals.get(timeout=5)
            assert arrived - offered < TIMEOUT_S / 2, "the live peer waited for the dead one"
            assert orjson.loads(body)["queue"] == f"q{n}"
            assert headers["X-Queen-Peer-Secret"] == "s3cret"


def test_udp_receiver_binds_loopback_by_default_and_checks_tags(
    make_service: Callable[..., PeerService],
) -> None:
    got: queue.Queue[dict[str, Any]] = queue.Queue()
    service = make_service(udp_peers=("127.0.0.1:9",), secret="s3cret",
                           apply=lambda event, source: got.put(event))  # fmt: skip
    assert service._udp is not None
    assert service._udp.getsockname() == ("127.0.0.1", service.udp_port)
    body = orjson.dumps(to_wire(PUSH))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
        out.sendto(body, ("127.0.0.1", service.udp_port))  # unsigned
        out.sendto(PeerAuth("wrong").sign(body), ("127.0.0.1", service.udp_port))
        out.sendto(PeerAuth("s3cret").sign(body), ("127.0.0.1", service.udp_port))
        assert got.get(timeout=5)["queue"] == "q"  # datagrams are read in order
    assert service.rejected == {"http": 0, "udp": 2}
    assert service.stats()["rejected"] == {"http": 0, "udp": 2}
    assert got.empty()


def test_udp_bind_address_is_configurable(make_service: Callable[..., PeerService]) -> None:
    service = make_service(udp_peers=("127.0.0.1:9",), udp_bind="0.0.0.0")
    assert service._udp is not None and service._udp.getsockname()[0] == "0.0.0.0"


def test_sibling_sockets_bind_under_a_temp_folder_too_deep_for_socket_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    bus = SiblingBus(free_port())  # the worker used to fail to boot: AF_UNIX path too long
    sibling = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # another worker's socket
    try:
        assert bus.dir.startswith("/tmp/queen-threads-")
        sibling.bind(f"{bus.dir}/w4194303.sock")
        sibling.settimeout(5)
        bus.broadcast({"kind": "push", "queue": "q"})
        assert orjson.loads(sibling.recv(65536)) == {"kind": "push", "queue": "q"}
    finally:
        sibling.close()
        bus.close()
        os.unlink(f"{bus.dir}/w4194303.sock")
