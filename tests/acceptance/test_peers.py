"""Wake-ups through HTTP and UDP peers, with LISTEN/NOTIFY switched off so that the peer
path is the only fast one (the receiving instance polls its database only every 5 s)."""

from __future__ import annotations

import time

import httpx
import pytest

from queen_threads.embedded import free_port
from tests.acceptance.test_long_poll import Waiter, push, qname, wait_registered
from tests.support.server import ServerProcess

SLOW_POLLING = {"QUEEN_LISTEN_NOTIFY": "false", "POLL_DB_INTERVAL": "5000",
                "QUEUE_MAX_POLL_INTERVAL": "10000"}  # fmt: skip


def assert_woken_by_peer(sender: ServerProcess, receiver: ServerProcess) -> None:
    q = qname()
    waiter = Waiter(receiver.url, q, timeout_ms=15000)
    waiter.start()
    wait_registered(receiver.url, 1)
    pushed_at = time.monotonic()
    push(sender.url, q, "via peer")
    waiter.join(15)
    assert waiter.response is not None and waiter.response.status_code == 200
    assert waiter.response.json()["messages"][0]["data"] == "via peer"
    assert waiter.answered_at - pushed_at < 1.5, "woken by the peer, not the 5 s poll"


def test_http_peer_notification_wakes_the_other_instance(migrated_dsn: str) -> None:
    receiver = ServerProcess(migrated_dsn, workers=2, **SLOW_POLLING)
    sender = ServerProcess(migrated_dsn, workers=1, QUEEN_PEERS=receiver.url, **SLOW_POLLING)
    with receiver, sender:
        assert_woken_by_peer(sender, receiver)


def test_udp_peer_notification_wakes_the_other_instance(migrated_dsn: str) -> None:
    port_r, port_s = free_port(), free_port()
    receiver = ServerProcess(
        migrated_dsn, workers=2, QUEEN_UDP_NOTIFY_PORT=port_r,
        QUEEN_UDP_PEERS=f"127.0.0.1:{port_s}", **SLOW_POLLING,
    )  # fmt: skip
    sender = ServerProcess(
        migrated_dsn, workers=1, QUEEN_UDP_NOTIFY_PORT=port_s,
        QUEEN_UDP_PEERS=f"127.0.0.1:{port_r}", **SLOW_POLLING,
    )  # fmt: skip
    with receiver, sender:
        assert_woken_by_peer(sender, receiver)


@pytest.mark.parametrize(
    "body", [b"nope", b"{}", b'{"type": "message_available"}', b'{"type": "x", "queue": "q"}']
)
def test_notify_route_rejects_bad_bodies(server: ServerProcess, body: bytes) -> None:
    r = httpx.post(f"{server.url}/internal/api/notify", content=body)
    assert r.status_code == 400
    assert r.json()["error"]


def test_notify_route_accepts_the_original_format(server: ServerProcess) -> None:
    body = {"type": "partition_free", "queue": "q", "partition": "p", "consumer_group": "g"}
    r = httpx.post(f"{server.url}/internal/api/notify", json=body)
    assert (r.status_code, r.json()) == (200, {"status": "ok"})
