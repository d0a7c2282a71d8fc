"""LISTEN/NOTIFY wake-ups: every push or freed lease in any process or instance reaches
the poll workers of this process through one listener connection, which reconnects by
itself (and wakes every poll worker after a reconnect, in case it missed something).

The loop never ends before `stop()`: whatever fails (the connection, the LISTEN, a bug),
the failure is logged and counted, and the listener connects again after a backoff that
doubles from 0.2 s up to 5 s (back to 0.2 s once a connection has stayed up 10 s). A
link that dies silently is found by the TCP keepalives every connection carries (db/connect.py).

Its DSN is the direct database (`DATABASE_DIRECT_URL`, else the pool's): a LISTEN is
session state, and through a transaction pooler it would register on some pooled server
connection and hear nothing on this one. NOTIFY needs no session: the stored functions
send it at commit from whatever connection the pool used.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from queen_threads.db import Listener
from queen_threads.errors import QueenError

log = logging.getLogger("queen_threads.listener")

CHANNEL = "queen_wakeup"
APPLICATION_NAME = "queen-threads-listener"
Handler = Callable[[dict[str, Any]], None]
Connect = Callable[[str, str], Listener]  # (dsn, application_name) -> a LISTENing Listener


def listen(dsn: str, application_name: str) -> Listener:
    return Listener(dsn, CHANNEL, application_name=application_name)


class Backoff:
    """Reconnect delays: `first_s`, doubling up to `max_s`; reset after a stable link."""

    def __init__(self, first_s: float = 0.2, max_s: float = 5.0, stable_s: float = 10.0) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self.stable_s = stable_s
        self._next = first_s

    def after(self, up_for_s: float) -> float:
        """The delay before the next attempt, for a connection that lasted `up_for_s`."""
        if up_for_s >= self.stable_s:
            self._next = self.first_s
        delay, self._next = self._next, min(self._next * 2, self.max_s)
        return delay


class WakeupListener:
    """Runs `handler(event)` for every wake-up event; `on_reconnect()` after a gap."""

    def __init__(
        self,
        dsn: str,
        handler: Handler,
        on_reconnect: Callable[[], None],
        *,
        connect: Connect = listen,
        backoff: Backoff | None = None,
    ) -> None:
        self.dsn = dsn
        self.handler = handler
        self.on_reconnect = on_reconnect
        self.connect = connect
        self.backoff = backoff or Backoff()
        self.application_name = f"{APPLICATION_NAME}:{os.getpid()}"
        self.received = 0
        self.reconnects = 0
        self.errors = 0
        self.last_error: str | None = None
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="queen-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stats(self) -> dict[str, Any]:
        return {
            "connected": self.connected.is_set(),
            "received": self.received,
            "reconnects": self.reconnects,
            "errors": self.errors,
            "lastError": self.last_error,
        }

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            listener: Listener | None = None
            up_since: float | None = None
            try:
                listener = self.connect(self.dsn, self.application_name)
                up_since = time.monotonic()
                self.connected.set()
                if not first:
                    self.reconnects += 1
                    self.on_reconnect()
                first = False
                self._listen(listener)
            except Exception as exc:  # anything at all: count, log, reconnect
                self._failed(exc, connected=up_since is not None)
            finally:
                self.connected.clear()
                if listener is not None:
                    listener.close()
            up_for = time.monotonic() - up_since if up_since is not None else 0.0
            self._stop.wait(self.backoff.after(up_for))

    def _failed(self, exc: Exception, connected: bool) -> None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        what = "lost its connection" if connected else "cannot connect"
        if isinstance(exc, QueenError):
            log.warning("wake-up listener %s: %s", what, exc)
        else:
            log.exception("wake-up listener failed unexpectedly (%s); reconnecting", what)

    def _listen(self, listener: Listener) -> None:
        while not self._stop.is_set():
            for payload in listener.wait(1.0):
                self.received += 1
                self._dispatch(payload)

    def _dispatch(self, payload: str) -> None:
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            log.warning("ignoring malformed wake-up payload %r", payload[:200])
            return
        if not isinstance(event, dict):
            return
        try:
            self.handler(event)
        except Exception:  # one event's failure must not drop the connection
            self.errors += 1
            log.exception("wake-up handler failed on %r", payload[:200])
