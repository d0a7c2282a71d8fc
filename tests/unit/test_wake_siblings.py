"""The sibling relay (wake/siblings.py): wake-ups only this instance's other worker
processes wait for go over their Unix sockets; the rest, and whatever a socket did not
take, go to the database as before. Real sockets in a temp folder."""

from __future__ import annotations

import os
import queue
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from queen_threads.embedded import free_port
from queen_threads.wake.notifier import WakeNotifier
from queen_threads.wake.peers import PeerService
from queen_threads.wake.siblings import SiblingBus, SiblingRelay, datagrams, origin_of
from queen_threads.wake.targets import WakeTargets

ME, SIBLING, ELSEWHERE = "a" * 32, "b" * 32, "c" * 32


class Interest:
    """What queen.wake_interest_read_v2 answers: queue -> the processes waiting for it."""

    def __init__(self, queues: dict[str, list[str]], scopes: list[str] | None = None) -> None:
        self.answer = {"epoch": 0, "queues": queues, "scopes": scopes or [], "ttlMs": 60_000}

    def __call__(self, origin: str) -> dict[str, Any]:
        return self.answer


def push(queue: str, partition: str = "P") -> dict[str, Any]:
    return {"kind": "push", "queue": queue, "partition": partition}


@pytest.fixture
def port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return free_port()


@pytest.fixture
def bus(port: int) -> Iterator[SiblingBus]:
    bus = SiblingBus(port, ME)
    yield bus
    bus.close()


class Sibling:
    """Another worker process's socket in the instance's folder."""

    def __init__(self, bus: SiblingBus, origin: str, pid: int = 4194303) -> None:
        self.path = os.path.join(bus.dir, f"w{pid}.{origin}.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(5)

    def wakes(self) -> list[dict[str, Any]]:
        message = orjson.loads(self.sock.recv(65536))
        return list(message["wakes"])

    def pending(self) -> bool:
        self.sock.settimeout(0.0)
        try:
            self.sock.recv(65536, socket.MSG_PEEK)
            return True
        except BlockingIOError:
            return False
        finally:
            self.sock.settimeout(5)

    def close(self) -> None:
        self.sock.close()
        if os.path.exists(self.path):
            os.unlink(self.path)


@pytest.fixture
def sibling(bus: SiblingBus) -> Iterator[Sibling]:
    sibling = Sibling(bus, SIBLING)
    yield sibling
    sibling.close()


def relay_for(bus: SiblingBus, interest: Interest) -> SiblingRelay:
    return SiblingRelay(WakeTargets(interest, ME, lambda: 0), lambda: bus)


def test_the_folder_lists_the_other_processes_by_origin(bus: SiblingBus, sibling: Sibling) -> None:
    legacy = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # a peer relay's old name
    legacy.bind(os.path.join(bus.dir, "w17.sock"))
    try:
        assert bus.siblings() == {SIBLING: sibling.path}
    finally:
        legacy.close()
    assert origin_of(bus.path) == ME and origin_of("/x/w17.sock") is None


def test_what_only_siblings_wait_for_goes_to_them_and_not_to_the_database(
    bus: SiblingBus, sibling: Sibling
) -> None:
    relay = relay_for(bus, Interest({"q": [SIBLING]}))
    assert relay([push("q", "p1"), push("q", "p2")]) == []
    assert sibling.wakes() == [push("q", "p1"), push("q", "p2")]
    assert relay.stats() == {"relayed": 2, "datagrams": 1, "fallbacks": 0}


def test_what_a_process_out_of_reach_waits_for_goes_to_the_database(
    bus: SiblingBus, sibling: Sibling
) -> None:
    relay = relay_for(bus, Interest({"mine": [SIBLING], "shared": [SIBLING, ELSEWHERE]}))
    assert relay([push("shared"), push("mine")]) == [push("shared")]
    assert sibling.wakes() == [push("mine")]  # NOTIFY reaches the sibling for "shared"


def test_a_scope_waited_for_sends_everything_to_the_database_which_matches_it(
    bus: SiblingBus, sibling: Sibling
) -> None:
    relay = relay_for(bus, Interest({"q": [SIBLING]}, scopes=[SIBLING]))
    assert relay([push("q")]) == [push("q")]
    assert not sibling.pending()


def test_a_full_socket_queue_falls_back_to_the_database(bus: SiblingBus, sibling: Sibling) -> None:
    relay = relay_for(bus, Interest({"q": [SIBLING]}))
    rest: list[dict[str, Any]] = []
    for n in range(1000):  # the sibling reads nothing: its queue fills (max_dgram_qlen)
        rest = relay([push("q", f"p{n}")])
        if rest:
            break
    assert rest == [push("q", f"p{n}")]
    assert relay.stats()["fallbacks"] == 1 and relay.stats()["relayed"] == n


def test_a_gone_sibling_falls_back_to_the_database_and_its_socket_is_removed(
    bus: SiblingBus,
) -> None:
    gone = Sibling(bus, SIBLING)
    gone.sock.close()  # the process died; its socket file stayed
    relay = relay_for(bus, Interest({"q": [SIBLING]}))
    assert relay([push("q")]) == [push("q")]
    assert not os.path.exists(gone.path)
    assert relay([push("q")]) == [push("q")]  # no longer in reach: NOTIFY


def test_without_a_bus_everything_goes_to_the_database() -> None:
    relay = SiblingRelay(WakeTargets(Interest({"q": [SIBLING]}), ME, lambda: 0), lambda: None)
    assert relay([push("q")]) == [push("q")]


def test_many_events_are_split_into_datagrams_that_fit() -> None:
    events = [push("q", f"partition-{n:04d}") for n in range(100)]
    packed = datagrams(events, limit=1000)
    assert len(packed) > 1 and all(len(data) <= 1000 for data, _ in packed)
    assert [e for data, _ in packed for e in orjson.loads(data)["wakes"]] == events
    assert [e for _, carried in packed for e in carried] == events
    assert datagrams([push("q" * 2000)], limit=1000) == []  # too large alone: NOTIFY


def test_the_notifier_calls_the_database_only_for_what_the_relay_did_not_deliver(
    bus: SiblingBus, sibling: Sibling
) -> None:
    calls: list[dict[str, Any]] = []

    def send(batch: dict[str, Any]) -> int:
        calls.append(batch)
        return len(batch["events"])

    targets = WakeTargets(Interest({"q": [SIBLING], "far": [ELSEWHERE]}), ME, lambda: 0)
    relay = SiblingRelay(targets, lambda: bus)
    notifier = WakeNotifier(send, ME, targets.wanted, relay)
    notifier.flush([push("q"), push("nobody")])
    assert calls == [] and sibling.wakes() == [push("q")]
    notifier.flush([push("q"), push("far")])
    assert [c["events"] for c in calls] == [[push("far")]]
    assert sibling.wakes() == [push("q")]


def test_a_worker_applies_its_siblings_wake_ups_as_such(port: int) -> None:
    got: queue.Queue[tuple[dict[str, Any], str]] = queue.Queue()
    service = PeerService(
        lambda event, source: got.put((event, source)),
        http_peers=(), udp_peers=(), udp_port=free_port(), batch_ms=0, host="127.0.0.1",
        port=port, origin=SIBLING,
    )  # fmt: skip
    service.start()
    me = SiblingBus(port, ME)
    try:
        assert service.bus is not None and me.siblings() == {SIBLING: service.bus.path}
        relay = relay_for(me, Interest({"q": [SIBLING]}))
        assert relay([push("q", "p1"), push("q", "p2")]) == []
        assert got.get(timeout=5) == (push("q", "p1"), "sibling")
        assert got.get(timeout=5) == (push("q", "p2"), "sibling")
        me.broadcast({"kind": "push", "queue": "r"})  # a peer's notification, relayed
        assert got.get(timeout=5) == ({"kind": "push", "queue": "r"}, "peer")
    finally:
        me.close()
        service.stop()
