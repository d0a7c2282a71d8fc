"""HTTPS (SSL_CERTFILE / SSL_KEYFILE) on the real gunicorn -k gevent server: a long poll
over TLS is woken by a push, and its keep-alive connection serves the next request."""

from __future__ import annotations

import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.acceptance.test_repeated_headers import push, refused, send
from tests.support.rawhttp import read_answer
from tests.support.server import ServerProcess
from tests.support.tls import self_signed


@pytest.fixture(scope="module")
def tls_server(
    pg_admin_dsn: str, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    from tests.conftest import database_from_template

    cert, key = self_signed(Path(tmp_path_factory.mktemp("tls")))
    with (
        database_from_template(pg_admin_dsn, template_db) as dsn,
        ServerProcess(dsn, workers=1, SSL_CERTFILE=cert, SSL_KEYFILE=key) as srv,
    ):
        yield srv


def tls_connection(srv: ServerProcess) -> ssl.SSLSocket:
    assert isinstance(srv.verify, ssl.SSLContext)
    raw = socket.create_connection(("127.0.0.1", srv.port))
    return srv.verify.wrap_socket(raw, server_hostname="localhost")


def tls_long_poll(srv: ServerProcess, queue: str) -> ssl.SSLSocket:
    """A 20 s long poll on `queue`, sent over a new TLS connection."""
    sock = tls_connection(srv)
    path = f"/api/v1/pop/queue/{queue}?wait=true&timeout=20000"
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def test_a_long_poll_over_tls_is_woken_by_a_push_and_keeps_its_connection(
    tls_server: ServerProcess,
) -> None:
    q = f"tls-{uuid.uuid4().hex[:10]}"
    sock = tls_long_poll(tls_server, q)
    answers: list[tuple[bytes, bytes]] = []
    reader = threading.Thread(target=lambda: answers.append(read_answer(sock, 25)))
    reader.start()
    deadline = time.monotonic() + 10
    while (
        httpx.get(f"{tls_server.url}/metrics", verify=tls_server.verify).json()["longPolling"][
            "registry"
        ]["intentions"]
        != 1
    ):  # one worker process: its own count
        assert time.monotonic() < deadline, "the long poll never registered"
        time.sleep(0.02)
    pushed_at = time.monotonic()
    r = httpx.post(
        f"{tls_server.url}/api/v1/push",
        json={"items": [{"queue": q, "payload": {"over": "tls"}}]},
        verify=tls_server.verify,
    )
    assert r.status_code == 201, r.text
    reader.join(10)
    assert answers, "the long poll was not answered"
    assert time.monotonic() - pushed_at < 1.0, "woken by the push, not at a later poll"
    head, body = answers[0]
    assert head.startswith(b"HTTP/1.1 200 ")
    assert httpx.Response(200, content=body).json()["messages"][0]["data"] == {"over": "tls"}
    # the same TLS connection serves the next request
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, body = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 200 ") and b'"healthy"' in body
    sock.close()


def test_a_departed_tls_client_is_noticed_and_its_poll_withdrawn(
    tls_server: ServerProcess,
) -> None:
    q = f"tls-{uuid.uuid4().hex[:10]}"
    sock = tls_long_poll(tls_server, q)

    def waiting() -> int:
        body = httpx.get(f"{tls_server.url}/metrics", verify=tls_server.verify).json()
        return int(body["longPolling"]["registry"]["intentions"])

    deadline = time.monotonic() + 10
    while waiting() != 1:
        assert time.monotonic() < deadline, "the long poll never registered"
        time.sleep(0.02)
    sock.close()
    while waiting() != 0:
        assert time.monotonic() < deadline, "the departed client's poll is still waiting"
        time.sleep(0.02)
    # nothing was leased for it: a new consumer gets a message pushed now at once
    httpx.post(
        f"{tls_server.url}/api/v1/push",
        json={"items": [{"queue": q, "payload": 1}]},
        verify=tls_server.verify,
    )
    r = httpx.get(f"{tls_server.url}/api/v1/pop/queue/{q}", verify=tls_server.verify)
    assert r.status_code == 200 and r.json()["messages"][0]["data"] == 1


def test_over_tls_an_identical_repeated_content_type_is_read_as_one_and_differing_refused(
    tls_server: ServerProcess,
) -> None:
    """The repeated-header fold (queen_threads/http/folding.py) in the TLS worker too; the
    plain cases: tests/acceptance/test_repeated_headers.py."""
    q = f"tls-{uuid.uuid4().hex[:10]}"
    json_type = "Content-Type: application/json"
    sock = tls_connection(tls_server)
    assert send(sock, push(q, json_type, json_type, "Content-Length: {n}"))[0] == 201
    status, answer = send(
        sock, push(q, json_type, "Content-Type: text/plain", "Content-Length: {n}")
    )
    assert (status, refused(answer)) == (400, "CONTENT-TYPE")
    sock.close()
    r = httpx.get(f"{tls_server.url}/api/v1/pop/queue/{q}?batch=5", verify=tls_server.verify)
    assert r.status_code == 200 and len(r.json()["messages"]) == 1
