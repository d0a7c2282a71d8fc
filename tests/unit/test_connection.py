from __future__ import annotations

import os
import socket

from queen_threads.http.connection import client_gone


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
