"""Outbound HTTP notifications to one peer, from a worker (thread or greenlet) of its own.

Each peer has its own queue, keep-alive connection and short timeout, so a dead or slow
peer delays nobody else: its worker gives up on the current batch at the first failure,
pauses, and goes on with what was queued meanwhile (notifications are best effort; the
database's LISTEN/NOTIFY and the poll interval cover what a peer misses).
"""

from __future__ import annotations

import http.client
import logging
import threading
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("queen_threads.peers")

PATH = "/internal/api/notify"
TIMEOUT_S = 0.5  # connect, send and each read of one notification
PAUSE_S = 1.0  # after a failure, before the peer is tried again


class HttpPeer:
    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        timeout_s: float = TIMEOUT_S,
        pause_s: float = PAUSE_S,
    ) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        self.url = url
        self.host = parts.hostname or "localhost"
        self.port = parts.port or 80
        self.headers = {"Content-Type": "application/json", **headers}
        self.timeout_s = timeout_s
        self.pause_s = pause_s
        self.sent = self.errors = self.dropped = 0
        self._conn: http.client.HTTPConnection | None = None
        self._pending: dict[tuple[Any, ...], bytes] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._last_status = 200

    def offer(self, bodies: dict[tuple[Any, ...], bytes]) -> None:
        """Queue notifications (the newest body per key wins) and wake the worker."""
        with self._lock:
            self._pending.update(bodies)
        self._wake.set()

    def start(self) -> None:
        threading.Thread(target=self._run, name=f"queen-peer-{self.port}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            with self._lock:
                bodies, self._pending = list(self._pending.values()), {}
            for done, body in enumerate(bodies):
                if self._stop.is_set():
                    break
                if not self.post(body):
                    self.dropped += len(bodies) - done - 1
                    self._stop.wait(self.pause_s)
                    break
        self._close()

    def post(self, body: bytes) -> bool:
        """Send one notification; False when the peer could not be reached in time."""
        for attempt in (1, 2):  # a kept-alive connection may have been closed by the peer
            reused = self._conn is not None
            conn = self._conn or http.client.HTTPConnection(
                self.host, self.port, timeout=self.timeout_s
            )
            self._conn = conn
            try:
                conn.request("POST", PATH, body, self.headers)
                response = conn.getresponse()
                response.read()
            except (OSError, http.client.HTTPException) as exc:
                self._close()
                if reused and attempt == 1:
                    continue
                self.errors += 1
                log.debug("notify %s failed: %s", self.url, exc)
                return False
            self._answered(response.status)
            return True
        return False

    def _answered(self, status: int) -> None:
        if status < 300:
            self.sent += 1
        else:
            self.errors += 1
            if status != self._last_status:  # once per change, not per notification
                log.warning("peer %s answers notifications with HTTP %d", self.url, status)
        self._last_status = status

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
