"""Wake-ups through HTTP and UDP peers, with LISTEN/NOTIFY switched off so that the peer
path is the only fast one (the receiving instance polls its database only every 5 s)."""

from __future__ import annotations

import httpx
import pytest

from queen_threads.embedded import free_port
from tests.acceptance.test_long_poll import assert_push_wakes
from tests.support.server import ServerProcess

SLOW_POLLING = {"QUEEN_LISTEN_NOTIFY": "false", "POLL_DB_INTERVAL": "5000",
                "QUEUE_MAX_POLL_INTERVAL": "10000"}  # fmt: skip


def test_http_peer_notification_wakes_the_other_instance(migrated_dsn: str) -> None:
    receiver = ServerProcess(migrated_dsn, workers=2, **SLOW_POLLING)
    sender = ServerProcess(migrated_dsn, workers=1, QUEEN_PEERS=receiver.url, **SLOW_POLLING)
    with receiver, sender:
        assert_push_wakes(sender, receiver, within_s=1.5)  # not the 5 s poll


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
        assert_push_wakes(sender, receiver, within_s=1.5)  # not the 5 s poll


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
