"""Is the client still there? Delivery tracking for responses that carry leases."""

from __future__ import annotations

import os
import select
import socket
from collections.abc import Callable, Iterator
from typing import Any


def client_gone(environ: dict[str, Any]) -> bool:
    """True when the client closed its connection (see :func:`socket_gone`).

    Works with gunicorn's workers, which put the connection in `gunicorn.socket`.
    """
    sock = environ.get("gunicorn.socket")
    return False if sock is None else socket_gone(sock)


def socket_gone(sock: Any) -> bool:
    """True when the peer closed the connection (readable socket with nothing to read).

    Uses poll(), not select(): select() cannot watch descriptors >= 1024, and a worker
    holding thousands of long polls has many. A pipelined next request also makes the
    socket readable; that is not 'gone'.
    """
    try:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN | select.POLLRDHUP)
        events = poller.poll(0)
        if not events:
            return False
        if events[0][1] & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
            return True
        return _peek(sock) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True


def _peek(sock: Any) -> bytes:
    """One byte of the connection, left in place. A TLS socket refuses recv() flags, and
    its decrypted stream is not what tells a close apart: peek at the TCP bytes under it
    through a duplicate descriptor (closing the duplicate leaves the connection open)."""
    flags = socket.MSG_PEEK | socket.MSG_DONTWAIT
    if not hasattr(sock, "cipher"):
        return bytes(sock.recv(1, flags))
    raw = socket.socket(fileno=os.dup(sock.fileno()))
    try:
        return raw.recv(1, flags)
    finally:
        raw.close()


def watch_readable(environ: dict[str, Any], nudge: Callable[[], None]) -> Callable[[], None]:
    """Call `nudge()` (in a new greenlet) when the client's socket becomes readable, which
    is how a disconnect shows; returns a function that stops watching. Event-driven, so a
    waiting long poll costs no CPU while it waits. A no-op outside gevent/gunicorn."""
    sock = environ.get("gunicorn.socket")
    if sock is None:
        return _nothing
    try:
        import gevent
    except ImportError:  # pragma: no cover - gevent is a dependency
        return _nothing
    watcher = gevent.get_hub().loop.io(sock.fileno(), 1)  # 1 = READ

    def fire() -> None:  # runs in the hub: must not block, so hand over to a greenlet
        watcher.stop()
        gevent.spawn(nudge)

    watcher.start(fire)

    def cancel() -> None:
        watcher.stop()
        watcher.close()

    return cancel


def _nothing() -> None:
    return None


class TrackedBody:
    """A one-chunk response body that calls `on_undelivered` unless the server finished
    writing it, and `on_delivered` once it did.

    A WSGI server asks for the next chunk only after it wrote the previous one, so the
    second ``next()`` means delivered; if the write fails (or nothing was ever asked for)
    it calls ``close()`` first, which means undelivered. Exactly one of the two is called.
    """

    def __init__(
        self,
        body: bytes,
        on_undelivered: Callable[[], None],
        on_delivered: Callable[[], None] | None = None,
    ) -> None:
        self._body: bytes | None = body
        self._on_undelivered = on_undelivered
        self._on_delivered = on_delivered
        self._settled = False

    @property
    def body(self) -> bytes | None:
        """The body until it is handed to the server (what the telemetry middleware reads
        for a delivering answer's messages)."""
        return self._body

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self._body is not None:
            body, self._body = self._body, None
            return body
        if not self._settled:
            self._settled = True
            if self._on_delivered is not None:
                self._on_delivered()
        raise StopIteration

    def close(self) -> None:
        if not self._settled:
            self._settled = True
            self._on_undelivered()
