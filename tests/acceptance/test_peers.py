"""Wake-ups through HTTP and UDP peers, with LISTEN/NOTIFY switched off so that the peer
path is the only fast one (the receiving instance polls its database only every 5 s).
With QUEEN_PEER_SECRET set, notifications without the secret (HTTP) or a valid HMAC tag
(UDP) are refused, counted and wake nothing."""

from __future__ import annotations

import socket
import time
from typing import Any

import httpx
import orjson
import psycopg2
import psycopg2.extensions
import pytest
from prometheus_client.parser import text_string_to_metric_families

from queen_threads.embedded import free_port
from queen_threads.wake.peer_auth import HEADER, PeerAuth
from tests.acceptance.test_long_poll import Waiter, assert_push_wakes, qname
from tests.integration.test_listener import push_by_sql
from tests.support.blackhole import BlackHole
from tests.support.server import ServerProcess

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)

SLOW_POLLING = {"QUEEN_LISTEN_NOTIFY": "false", "POLL_DB_INTERVAL": "5000",
                "QUEUE_MAX_POLL_INTERVAL": "10000"}  # fmt: skip
SECRET = "s3cret-peer-key"


@pytest.mark.parametrize("secret", ["", SECRET])
def test_http_peer_notification_wakes_the_other_instance(migrated_dsn: str, secret: str) -> None:
    receiver = ServerProcess(migrated_dsn, workers=2, QUEEN_PEER_SECRET=secret, **SLOW_POLLING)
    with BlackHole() as dead:  # listed first: the live peer must not wait for it
        sender = ServerProcess(
            migrated_dsn, workers=1, QUEEN_PEERS=f"{dead.url},{receiver.url}",
            QUEEN_PEER_SECRET=secret, **SLOW_POLLING,
        )  # fmt: skip
        with receiver, sender:
            assert_push_wakes(sender, receiver, within_s=1.0)  # not the 5 s poll
            assert peer_stats(receiver.url)["rejected"] == {"http": 0, "udp": 0}


@pytest.mark.parametrize("secret", ["", SECRET])
def test_udp_peer_notification_wakes_the_other_instance(migrated_dsn: str, secret: str) -> None:
    port_r, port_s = free_port(), free_port()
    receiver = ServerProcess(
        migrated_dsn, workers=2, QUEEN_UDP_NOTIFY_PORT=port_r,
        QUEEN_UDP_PEERS=f"127.0.0.1:{port_s}", QUEEN_PEER_SECRET=secret, **SLOW_POLLING,
    )  # fmt: skip
    sender = ServerProcess(
        migrated_dsn, workers=1, QUEEN_UDP_NOTIFY_PORT=port_s,
        QUEEN_UDP_PEERS=f"127.0.0.1:{port_r}", QUEEN_PEER_SECRET=secret, **SLOW_POLLING,
    )  # fmt: skip
    with receiver, sender:
        assert_push_wakes(sender, receiver, within_s=1.5)  # not the 5 s poll


# -- a guarded instance (one worker process: /metrics always describes the receiver) -----
def peer_stats(url: str) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(f"{url}/metrics").json()["peers"]
    return stats


def peer_wakeups(url: str) -> int:
    totals = httpx.get(f"{url}/metrics").json()["longPolling"]["totals"]
    return int(totals["wakeups"].get("peer", 0))


def prometheus_rejected(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics/prometheus").text
    return {
        sample.labels["transport"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "queen_peer_notifications_rejected_total"
    }


def waiting_message(srv: ServerProcess, conn: psycopg2.extensions.connection) -> Waiter:
    """A long poll on a queue whose message was stored behind the server's back (SQL, no
    NOTIFY heard): only a peer notification wakes it before the 5 s poll."""
    q = qname()
    waiter = Waiter(srv.url, q, timeout_ms=15000)
    waiter.start()
    deadline = time.monotonic() + 10
    while httpx.get(f"{srv.url}/metrics").json()["longPolling"]["registry"]["intentions"] != 1:
        assert time.monotonic() < deadline, "the long poll never registered"
        time.sleep(0.01)
    push_by_sql(conn, q)
    return waiter


def notification(queue: str) -> bytes:
    return orjson.dumps({"type": "message_available", "queue": queue, "partition": "Default"})


def assert_woken(waiter: Waiter, since: float) -> None:
    waiter.join(10)
    assert waiter.response is not None and waiter.response.status_code == 200
    assert waiter.response.json()["messages"][0]["data"] == "x"
    assert waiter.answered_at - since < 1.0, "woken by the peer notification"


def test_http_notify_needs_the_peer_secret(
    migrated_dsn: str, admin_conn: psycopg2.extensions.connection
) -> None:
    with ServerProcess(migrated_dsn, workers=1, QUEEN_PEER_SECRET=SECRET, **SLOW_POLLING) as srv:
        waiter = waiting_message(srv, admin_conn)
        queue = waiter.url.rsplit("/", 1)[1]
        url = f"{srv.url}/internal/api/notify"
        missing = httpx.post(url, content=notification(queue))
        wrong = httpx.post(url, content=notification(queue), headers={HEADER: "guess"})
        assert missing.status_code == 401 and "missing" in missing.json()["error"]
        assert wrong.status_code == 403 and "wrong" in wrong.json()["error"]
        assert peer_stats(srv.url)["rejected"] == {"http": 2, "udp": 0}
        assert prometheus_rejected(srv.url).get("http") == 2.0
        assert peer_wakeups(srv.url) == 0 and waiter.response is None  # nothing woken
        sent_at = time.monotonic()
        ok = httpx.post(url, content=notification(queue), headers={HEADER: SECRET})
        assert (ok.status_code, ok.json()) == (200, {"status": "ok"})
        assert_woken(waiter, sent_at)
        assert peer_wakeups(srv.url) == 1
        assert peer_stats(srv.url)["rejected"] == {"http": 2, "udp": 0}


def test_udp_notifications_need_a_valid_tag(
    migrated_dsn: str, admin_conn: psycopg2.extensions.connection
) -> None:
    port = free_port()
    env = {"QUEEN_UDP_NOTIFY_PORT": port, "QUEEN_UDP_PEERS": "127.0.0.1:9",
           "QUEEN_PEER_SECRET": SECRET, **SLOW_POLLING}  # fmt: skip
    with ServerProcess(migrated_dsn, workers=1, **env) as srv:
        assert peer_stats(srv.url)["udpBind"] == f"127.0.0.1:{port}"
        waiter = waiting_message(srv, admin_conn)
        body = notification(waiter.url.rsplit("/", 1)[1])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
            out.sendto(body, ("127.0.0.1", port))  # unsigned
            out.sendto(PeerAuth("guess").sign(body), ("127.0.0.1", port))  # wrong key
            deadline = time.monotonic() + 10
            while peer_stats(srv.url)["rejected"]["udp"] < 2:
                assert time.monotonic() < deadline, "the datagrams were never counted"
                time.sleep(0.01)
            assert peer_stats(srv.url)["rejected"] == {"http": 0, "udp": 2}
            assert prometheus_rejected(srv.url).get("udp") == 2.0
            assert peer_wakeups(srv.url) == 0 and waiter.response is None  # nothing woken
            sent_at = time.monotonic()
            out.sendto(PeerAuth(SECRET).sign(body), ("127.0.0.1", port))
            assert_woken(waiter, sent_at)
        assert peer_wakeups(srv.url) == 1


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
