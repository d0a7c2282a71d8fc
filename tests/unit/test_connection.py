from __future__ import annotations

import os
import socket
import ssl
import threading
from pathlib import Path

from queen_threads.http.connection import client_gone
from tests.support.tls import self_signed


def test_open_idle_connection_is_not_gone() -> None:
    a, b = socket.socketpair()
    try:
        assert client_gone({"gunicorn.socket": a}) is False
        b.sendall(b"GET / HTTP/1.1\r\n")  # a pipelined request is not a departure
        assert client_gone({"gunicorn.socket": a}) is False
        assert a.recv(100), "peeking left the data in place"
    finally:
        a.close()
        b.close()


def test_closed_peer_is_gone() -> None:
    a, b = socket.socketpair()
    b.close()
    try:
        assert client_gone({"gunicorn.socket": a}) is True
    finally:
        a.close()


def test_descriptors_above_1024_work() -> None:
    # select() cannot watch fd >= 1024; a worker with thousands of long polls has them.
    a, b = socket.socketpair()
    high = os.dup2(a.fileno(), 1500)
    sock = socket.socket(fileno=high)
    try:
        assert client_gone({"gunicorn.socket": sock}) is False
        b.close()
        assert client_gone({"gunicorn.socket": sock}) is True
    finally:
        sock.close()
        a.close()


def test_no_socket_means_unknown_not_gone() -> None:
    assert client_gone({}) is False


def test_tls_connections_are_checked_below_the_encryption(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[ssl.SSLSocket] = []
    thread = threading.Thread(
        target=lambda: accepted.append(server_ctx.wrap_socket(listener.accept()[0], True))
    )
    thread.start()
    client = client_ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", port)), server_hostname="localhost"
    )
    thread.join(5)
    server = accepted[0]
    try:
        assert client_gone({"gunicorn.socket": server}) is False
        client.sendall(b"GET / HTTP/1.1\r\n")  # pipelined bytes are not a departure
        assert client_gone({"gunicorn.socket": server}) is False
        assert server.recv(100) == b"GET / HTTP/1.1\r\n", "the TLS stream is intact"
        client.close()
        assert client_gone({"gunicorn.socket": server}) is True
    finally:
        server.close()
        listener.close()
