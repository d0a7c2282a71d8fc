"""Is the client still there? Delivery tracking for responses that carry leases."""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Iterator
from typing import Any


def client_gone(environ: dict[str, Any]) -> bool:
    """True when the client closed its connection (readable socket with nothing to read).

    Works with gunicorn's workers, which put the connection in `gunicorn.socket`.
    A pipelined next request also makes the socket readable; that is not 'gone'.
    """
    sock = environ.get("gunicorn.socket")
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True


def tracked(body: bytes, on_undelivered: Callable[[], None]) -> Iterator[bytes]:
    """A response body that calls `on_undelivered` unless the server finished writing it.

    The WSGI server asks for the next chunk only after the previous one was written; if the
    write fails it closes the iterator instead, which lands in `finally` undelivered.
    """
    delivered = False
    try:
        yield body
        delivered = True
    finally:
        if not delivered:
            on_undelivered()
