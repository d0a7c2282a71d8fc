"""Is the client still there? Delivery tracking for responses that carry leases."""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Iterator
from typing import Any


def client_gone(environ: dict[str, Any]) -> bool:
    """True when the client closed its connection (readable socket with nothing to read).

    Works with gunicorn's workers, which put the connection in `gunicorn.socket`. Uses
    poll(), not select(): select() cannot watch descriptors >= 1024, and a worker holding
    thousands of long polls has many. A pipelined next request also makes the socket
    readable; that is not 'gone'.
    """
    sock = environ.get("gunicorn.socket")
    if sock is None:
        return False
    try:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN | select.POLLRDHUP)
        events = poller.poll(0)
        if not events:
            return False
        if events[0][1] & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
            return True
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
