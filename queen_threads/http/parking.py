"""Parked long polls: waiting without a greenlet, answered from the response queue.

A ``wait=true`` pop that must wait does not keep its request greenlet (with the greenlet's
copied C stack, its Python frames, gunicorn's and falcon's request objects: about 20 KB
each) parked for up to the whole timeout. Instead the pop resource *parks* it: the
intention is registered with a callback instead of a waiting greenlet, the connection is
taken over from gunicorn (its socket is detached, and the WSGI call ends with
``StopIteration``, which makes gunicorn drop the connection without writing anything),
and all that remains while it waits is a :class:`ParkedPoll` and the socket, watched for a
disconnect by one io watcher. When the poll worker posts the answer, a short-lived
greenlet writes the HTTP response and hands the still-open connection back to gunicorn's
keep-alive loop (``serve``), so clients keep their connections.

Parking needs gunicorn's gevent worker (``install`` is called from its
``post_worker_init`` hook); anywhere else (the falcon test client, HTTP/2, a request with
pipelined bytes behind it) :func:`prepare` returns ``None`` and the request greenlet waits
as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from contextlib import suppress
from email.utils import formatdate
from typing import Any, Protocol

import gevent
import gevent.pool
from gevent import socket as gsocket

from queen_threads.http.connection import socket_gone
from queen_threads.polling import PollIntention, Response

log = logging.getLogger("queen_threads.http")

ENVIRON_KEY = "queen_threads.parked"
GONE = 499  # status recorded (not sent) for a client that left while parked, as nginx does

Serve = Callable[[Any, Any], None]
"""``serve(sock, addr)``: go on serving a kept-alive connection (gunicorn's handle)."""
Finish = Callable[[str, str, int, float, str | None], None]
"""``finish(method, uri, status, started, request_id)``: the access line and counters."""

_REASONS = {200: "OK", 204: "No Content"}


class Polling(Protocol):
    """What a parked poll needs of the long-poll service."""

    def withdraw(self, intention: PollIntention) -> None: ...

    def release(self, lease_ids: Iterable[str]) -> None: ...

    def pop_paused(self) -> bool: ...


class ParkingLot:
    """The parked polls of one worker process: how to serve a connection on, and the
    greenlets writing answers (joined at shutdown so none is cut off)."""

    def __init__(self) -> None:
        self._serve: Serve | None = None
        self._writers = gevent.pool.Group()
        self.closing = False

    @property
    def installed(self) -> bool:
        return self._serve is not None

    def install(self, serve: Serve) -> None:
        """Enable parking; ``serve(sock, addr)`` continues a kept-alive connection."""
        self._serve = serve
        self.closing = False

    def close(self, timeout: float) -> bool:
        """Shutting down: answers still being written finish (up to ``timeout`` s), the
        connections they leave are closed instead of served on. True if all finished."""
        self.closing = True
        return self.wait(timeout)

    def wait(self, timeout: float) -> bool:
        """Until no answer is being written (up to ``timeout`` s); True if none is."""
        self._writers.join(timeout)
        return len(self._writers) == 0

    def spawn(self, func: Callable[..., None], *args: Any) -> None:
        self._writers.spawn(func, *args)

    def serve(self, sock: Any) -> bool:
        """Hand ``sock`` back to gunicorn's keep-alive loop; False if not possible."""
        if self._serve is None or self.closing:
            return False
        try:
            addr = sock.getpeername()
        except OSError:
            return False
        self._writers.discard(gevent.getcurrent())  # a connection now, not an answer
        self._serve(sock, addr)
        return True


LOT = ParkingLot()


def prepare(environ: dict[str, Any], lot: ParkingLot = LOT) -> ParkedPoll | None:
    """A ParkedPoll for this request if its connection can be taken over, else None."""
    if not lot.installed or lot.closing:
        return None
    sock = environ.get("gunicorn.socket")
    if sock is None or not str(environ.get("SERVER_PROTOCOL", "")).startswith("HTTP/1"):
        return None
    if _read_ahead(environ) != 0:
        return None  # pipelined bytes sit in gunicorn's buffer: leave it the connection
    return ParkedPoll(lot, sock, _keep_alive(environ))


def _read_ahead(environ: dict[str, Any]) -> int | None:
    """Bytes gunicorn has read past this request (None if that cannot be told)."""
    try:
        return len(environ["wsgi.input"].reader.unreader.buf.getbuffer())
    except (AttributeError, KeyError, TypeError):
        return None


def _keep_alive(environ: dict[str, Any]) -> bool:
    """HTTP/1.1 keeps the connection unless asked to close; HTTP/1.0 only if asked to keep."""
    tokens = {t.strip().lower() for t in str(environ.get("HTTP_CONNECTION", "")).split(",")}
    if "close" in tokens:
        return False
    return environ.get("SERVER_PROTOCOL") != "HTTP/1.0" or "keep-alive" in tokens


class ParkedPoll:
    """One parked long poll: its connection, what to log, and the answer's way out.

    Life: :func:`prepare` (still gunicorn's connection) → the pop resource registers the
    intention with :meth:`answer` as callback and :meth:`describe` s the request → the
    WSGI wrapper calls :meth:`start`, which takes the socket over → :meth:`answer` (from
    the poll worker) → a writer greenlet sends the response and serves the connection on.
    An answer that arrives before :meth:`start` waits for it.
    """

    __slots__ = (
        "_finish",
        "_lot",
        "_pending",
        "_polling",
        "_sock",
        "_state",
        "_watcher",
        "headers",
        "intention",
        "keep_alive",
        "method",
        "request_id",
        "started",
        "uri",
    )

    _lock = threading.Lock()  # answer() vs start(): one lock for all, held for a moment

    def __init__(self, lot: ParkingLot, sock: Any, keep_alive: bool) -> None:
        self._lot = lot
        self._sock = sock
        self.keep_alive = keep_alive
        self._state = "new"  # new -> started -> answered | gone
        self._pending: Response | None = None
        self._watcher: Any = None
        self._polling: Polling | None = None
        self._finish: Finish | None = None
        self.intention: PollIntention | None = None
        self.headers: bytes = b""
        self.method = self.uri = self.request_id = ""
        self.started = 0.0

    def bind(self, polling: Polling, intention: PollIntention) -> None:
        """The long-poll service and intention this request was registered with."""
        self._polling = polling
        self.intention = intention

    def describe(
        self, method: str, uri: str, request_id: str, started: float, headers: bytes, finish: Finish
    ) -> None:
        """What the access line needs; ``headers`` (shared, pre-rendered with
        :func:`response_headers`) go on the answer with the X-Request-Id."""
        self.method, self.uri, self.request_id, self.started = method, uri, request_id, started
        self.headers = headers
        self._finish = finish

    # --- gunicorn's greenlet -----------------------------------------------------------
    def start(self) -> None:
        """Take the connection over from gunicorn (call, then end the WSGI call with
        StopIteration) and watch it for a disconnect until the answer comes."""
        fd = self._sock.detach()
        self._sock = gsocket.socket(fileno=fd)
        with self._lock:
            self._state = "started"
            pending, self._pending = self._pending, None
        if pending is not None:
            self._lot.spawn(self._write, pending)
            return
        self._watcher = gevent.get_hub().loop.io(fd, 1)  # 1 = READ
        self._watcher.start(self._readable)

    def abandon(self) -> None:
        """The request failed after the intention was registered: give it up."""
        with self._lock:
            self._state = "gone"
            pending, self._pending = self._pending, None
        if self._polling is None:
            return
        if self.intention is not None:
            self._polling.withdraw(self.intention)
        if pending is not None and pending.lease_ids:
            self._polling.release(pending.lease_ids)  # answered before it could be sent

    # --- poll worker (must not block) --------------------------------------------------
    def answer(self, response: Response) -> None:
        with self._lock:
            if self._state == "new":
                self._pending = response
                return
            state = self._state
        if state == "started":
            self._lot.spawn(self._write, response)
        elif response.lease_ids and self._polling is not None:
            self._lot.spawn(self._polling.release, response.lease_ids)

    # --- the hub, then a greenlet of its own -------------------------------------------
    def _readable(self) -> None:
        self._stop_watching()
        self._lot.spawn(self._check_gone)

    def _check_gone(self) -> None:
        if self._state != "started" or not socket_gone(self._sock):
            return  # answered meanwhile, or pipelined bytes: the answer will find out
        self._state = "gone"
        if self._polling is not None and self.intention is not None:
            self._polling.withdraw(self.intention)
        self._close()
        self._log(GONE)

    def _write(self, response: Response) -> None:
        """Writer greenlet: send the answer, then serve the connection on (or close it)."""
        self._stop_watching()
        if self._state != "started":
            if response.lease_ids and self._polling is not None:
                self._polling.release(response.lease_ids)
            return
        self._state = "answered"
        status, body, leases = response.status, response.body, response.lease_ids
        if status != 200 or not body:
            if leases and self._polling is not None:
                self._polling.release(leases)  # nothing to send under them
            status, body, leases = 204, None, ()
        elif self._polling is not None and (self._polling.pop_paused() or socket_gone(self._sock)):
            self._polling.release(leases)
            status, body, leases = 204, None, ()
        keep = self.keep_alive and not self._lot.closing
        try:
            self._sock.sendall(render(status, body, self.headers, self.request_id, keep))
        except OSError:
            if leases and self._polling is not None:
                self._polling.release(leases)
            self._close()
            self._log(GONE)
            return
        self._log(status)
        if not (keep and self._lot.serve(self._sock)):
            self._close()

    def _stop_watching(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
            watcher.close()

    def _close(self) -> None:
        with suppress(OSError):
            self._sock.close()

    def _log(self, status: int) -> None:
        if self._finish is not None:
            self._finish(self.method, self.uri, status, self.started, self.request_id)


def response_headers(pairs: Iterable[tuple[str, str]]) -> bytes:
    """Headers every answer of a request carries (CORS, request id), pre-rendered."""
    return "".join(f"{name}: {value}\r\n" for name, value in pairs).encode("latin-1")


def render(
    status: int, body: bytes | None, headers: bytes, request_id: str, keep_alive: bool
) -> bytes:
    """One HTTP/1.1 response: status line, Date, Connection, ``headers``, X-Request-Id,
    then the body (JSON) if any."""
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
        f"Date: {formatdate(usegmt=True)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n"
    ).encode("latin-1") + headers
    head += f"x-request-id: {request_id}\r\n".encode("latin-1")
    if body:
        head += b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body)
    return head + b"\r\n" + (body or b"")


def handing_over(app: Callable[..., Any]) -> Callable[..., Any]:
    """The WSGI app around falcon: after a request was parked, take its connection over
    and end gunicorn's handling of it (StopIteration: nothing written, its side closed)."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        try:
            result = app(environ, start_response)
        except BaseException:
            parked = environ.pop(ENVIRON_KEY, None)
            if parked is not None:
                parked.abandon()
            raise
        parked = environ.pop(ENVIRON_KEY, None)
        if parked is None:
            return result
        close = getattr(result, "close", None)
        if close is not None:
            close()
        parked.start()
        raise StopIteration("long poll parked: the connection is answered later")

    return wsgi
