"""LISTEN/NOTIFY wake-ups: every push or freed lease in any process or instance reaches
the poll workers of this process through one listener connection, which reconnects by
itself (and wakes every poll worker after a reconnect, in case it missed something)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import orjson

from queen_threads.db import Listener
from queen_threads.errors import QueenError

log = logging.getLogger("queen_threads.listener")

CHANNEL = "queen_wakeup"
Handler = Callable[[dict[str, Any]], None]


class WakeupListener:
    """Runs `handler(event)` for every wake-up event; `on_reconnect()` after a gap."""

    def __init__(self, dsn: str, handler: Handler, on_reconnect: Callable[[], None]) -> None:
        self.dsn = dsn
        self.handler = handler
        self.on_reconnect = on_reconnect
        self.received = 0
        self.reconnects = 0
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="queen-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        delay = 0.2
        first = True
        while not self._stop.is_set():
            try:
                listener = Listener(self.dsn, CHANNEL)
            except QueenError as exc:
                log.warning("wake-up listener cannot connect: %s", exc)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.2
            self.connected.set()
            if not first:
                self.reconnects += 1
                self.on_reconnect()
            first = False
            try:
                self._listen(listener)
            except QueenError as exc:
                log.warning("wake-up listener lost its connection: %s", exc)
            finally:
                self.connected.clear()
                listener.close()

    def _listen(self, listener: Listener) -> None:
        while not self._stop.is_set():
            for payload in listener.wait(1.0):
                self.received += 1
                try:
                    event = orjson.loads(payload)
                except orjson.JSONDecodeError:
                    log.warning("ignoring malformed wake-up payload %r", payload[:200])
                    continue
                if isinstance(event, dict):
                    self.handler(event)
