"""The gunicorn worker class: gunicorn's gevent worker with deadlines for slow and silent
clients (config/gunicorn.conf.py names it; docs/security.md, "Slow and silent clients").

gunicorn's gevent worker reads every request head of a connection inside
``with self.timeout_ctx(): req = next(parser)`` (``AsyncWorker.handle``), the first one
included, and gives up on the connection when that block ends without a request. Its own
``timeout_ctx`` is one ``gevent.Timeout(keepalive)`` for the wait *and* the head, so a
client could trickle a header for the whole keep-alive bound. This worker overrides only
methods gunicorn's own ``GeventWorker`` overrides (``init_process``, ``handle``,
``timeout_ctx``, ``notify``), always calls gunicorn's version, and patches nothing but the
parser's message class (below):

- the first request's head must be complete ``head_timeout`` after the connection reached
  the worker: a silent connection and a trickled head are both closed then;
- between keep-alive requests a connection may stay silent ``idle_timeout``; from its first
  byte on, the next head must be complete within ``head_timeout``.

Over TLS the handshake comes first, and gevent's server does it before gunicorn's ``handle``
sees the socket, without any bound: a silent TLS client held its connection forever. So the
worker wraps whatever ``ssl_context`` hook is configured (gunicorn's public server hook,
through ``cfg.set``) so that sockets are wrapped without a handshake, and ``handle`` does
the handshake under the first request's deadline (gunicorn's own ``do_handshake()`` after
it finds the handshake done).

A request head that repeats ``Content-Type`` with one value (Queen's C++ client sends it
twice) is read as one (``folding.py``: ``folding.install()`` sets gunicorn's
``RequestParser.mesg_class``, in the worker process only); every other refusal of
gunicorn's parser stands.

When the worker stops (SIGTERM), an idle keep-alive connection is closed at the next
heartbeat (``notify``) instead of holding the worker until GRACEFUL_TIMEOUT.

A request already read (a long poll waiting server-side, a body upload, a response being
written) is outside ``timeout_ctx`` and never cut. ``tests/unit/test_worker.py`` fails if
gunicorn stops reading heads this way; ``tests/acceptance/test_slow_clients.py`` holds
hostile connections against the real server.
"""

from __future__ import annotations

import functools
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any

import gevent
from gunicorn.workers.ggevent import GeventWorker

from queen_threads.http import folding

log = logging.getLogger("queen_threads.http")


class HeadTimeout(BaseException):
    """A connection's head (or keep-alive wait) outlived its bound: close it. A
    BaseException, like gevent.Timeout, so no ``except Exception`` on the way swallows it."""


class _Connection:
    """What the deadlines need to know about one connection its handler greenlet serves."""

    __slots__ = ("deadline", "fileno", "heads", "reached")

    def __init__(self, fileno: int) -> None:
        self.fileno = fileno
        self.reached = time.monotonic()
        self.heads = 0  # request heads read so far
        self.deadline: HeadDeadline | None = None  # the current head read's


class HeadDeadline:
    """The bound on one ``next(parser)``: swallows its own expiry (gunicorn then closes the
    connection, exactly as when its own ``gevent.Timeout(keepalive, False)`` fires).

    ``head_s`` counts from ``start`` (the first request: when the connection reached the
    worker). With ``idle_s`` the wait for the first byte has that bound instead, and
    ``head_s`` counts from the moment the socket turns readable.
    """

    def __init__(
        self, fileno: int, head_s: float, idle_s: float | None = None, start: float | None = None
    ) -> None:
        self._fileno = fileno
        self._head_s = head_s
        self._idle_s = idle_s
        self._start = time.monotonic() if start is None else start
        self._expired = HeadTimeout()
        self._greenlet: Any = None
        self._timer: Any = None
        self._watcher: Any = None
        self.expired_idle: bool | None = None  # after an expiry: in the idle wait or not

    def __enter__(self) -> HeadDeadline:
        self._greenlet = gevent.getcurrent()
        loop = gevent.get_hub().loop
        if self._idle_s is None:
            self._arm(self._start + self._head_s - time.monotonic())
        else:
            self._arm(self._idle_s)
            # Fires in the hub when the next request starts arriving (or the peer closes).
            self._watcher = loop.io(self._fileno, 1)  # 1 = READ
            self._watcher.start(self._first_byte)
        return self

    @property
    def idle(self) -> bool:
        """Waiting for a keep-alive connection's next request, not a byte of it yet."""
        return self._watcher is not None

    def expire_now(self) -> None:
        """End the wait at once (the worker is stopping): only while idle, never once a
        request has begun to arrive."""
        if self.idle:
            self._stop_watcher()
            self._disarm()
            self._arm(0.0)

    def __exit__(self, typ: Any, value: Any, tb: Any) -> bool:
        idle = self.idle
        self._stop_watcher()
        self._disarm()
        if value is not self._expired:
            return False
        self.expired_idle = idle
        return True

    def _first_byte(self) -> None:
        self._stop_watcher()
        self._disarm()
        self._arm(self._head_s)

    def _arm(self, seconds: float) -> None:
        # A timer of the hub's loop, not gevent.Timeout: it is re-armed from the watcher's
        # callback, which runs in the hub, and must still throw into the handler greenlet.
        self._timer = gevent.get_hub().loop.timer(max(0.0, seconds))
        self._timer.start(self._greenlet.throw, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer.close()
            self._timer = None

    def _stop_watcher(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher.close()
            self._watcher = None


class QueenGeventWorker(GeventWorker):
    """gunicorn's gevent worker whose request-head reads carry the deadlines above."""

    head_timeout: float = 10.0
    idle_timeout: float = 75.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections: dict[Any, _Connection] = {}  # by handler greenlet

    def init_process(self) -> None:
        from queen_threads.settings import load_settings

        settings = load_settings()  # validated by the master already: same environment
        self.head_timeout = settings.request_head_timeout_s
        self.idle_timeout = settings.idle_connection_timeout_s
        if self.cfg.is_ssl:
            self.cfg.set("ssl_context", handshake_in_handler(self.cfg.ssl_context))
        folding.install()  # an identical repeated Content-Type is read as one
        super().init_process()

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        current = gevent.getcurrent()
        conn = _Connection(client.fileno())
        if isinstance(client, ssl.SSLSocket) and not self._handshake(client, conn):
            return  # gevent's server closes the socket
        self._connections[current] = conn
        try:
            super().handle(listener, client, addr)
        finally:
            self._connections.pop(current, None)
            if conn.deadline is not None and conn.deadline.expired_idle is not None:
                log.debug(
                    "closed %s: %s",
                    addr,
                    "idle keep-alive" if conn.deadline.expired_idle else "no complete request head",
                )

    def _handshake(self, client: ssl.SSLSocket, conn: _Connection) -> bool:
        client.setblocking(True)
        try:
            with gevent.Timeout(max(0.0, conn.reached + self.head_timeout - time.monotonic())):
                client.do_handshake()
        except (gevent.Timeout, OSError) as exc:  # ssl.SSLError is an OSError
            log.debug("TLS handshake abandoned: %r", exc)
            return False
        return True

    def timeout_ctx(self) -> Any:
        conn = self._connections.get(gevent.getcurrent())
        if conn is None:  # not a connection this worker's handle() took: gunicorn's own
            return super().timeout_ctx()
        conn.heads += 1
        if conn.heads == 1:
            conn.deadline = HeadDeadline(conn.fileno, self.head_timeout, start=conn.reached)
        else:
            conn.deadline = HeadDeadline(conn.fileno, self.head_timeout, idle_s=self.idle_timeout)
        return conn.deadline

    def notify(self) -> None:
        """gunicorn's heartbeat, once a second, also while the worker drains on SIGTERM:
        then an idle keep-alive connection is closed at once. Otherwise each one would hold
        the worker until its idle bound or GRACEFUL_TIMEOUT, whichever came first."""
        super().notify()
        if not self.alive:
            for conn in list(self._connections.values()):
                if conn.deadline is not None:
                    conn.deadline.expire_now()


SSLContextHook = Callable[[Any, Callable[[], ssl.SSLContext]], ssl.SSLContext]


def handshake_in_handler(hook: SSLContextHook) -> SSLContextHook:
    """Wrap an ``ssl_context`` server hook: its context wraps sockets without handshaking
    (``do_handshake_on_connect=False``), so the handshake happens in the worker's
    ``handle`` under a deadline instead of in gevent's server without one."""

    def ssl_context(config: Any, default_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        context = hook(config, default_factory)
        wrap = context.wrap_socket
        context.wrap_socket = functools.partial(_wrap_without_handshake, wrap)  # type: ignore[method-assign]
        return context

    return ssl_context


def _wrap_without_handshake(wrap: Callable[..., Any], sock: Any, **kwargs: Any) -> Any:
    kwargs["do_handshake_on_connect"] = False
    return wrap(sock, **kwargs)
