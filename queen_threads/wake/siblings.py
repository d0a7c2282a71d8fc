"""Wake-ups between the worker processes of one instance, without the database.

Every worker process binds a Unix datagram socket in the instance's folder (`SiblingBus`),
named after its pid and its notifier's origin (the tag its `queen.wake_interest` rows
carry). It serves two purposes:

- relaying what an HTTP/UDP peer told one worker to the others (wake/peers.py);
- the sibling relay (`SiblingRelay`): of the wake-ups the notifier would NOTIFY after a
  push or an ack (wake/notifier.py), those that only sibling processes wait for (by the
  interest copy, wake/targets.py) are sent to those siblings' sockets instead. A NOTIFY
  costs a database transaction and every listener's work; a datagram costs two system
  calls. What some process out of reach waits for (another instance, a process whose
  socket is not in the folder, a namespace/task scope, which only the database can match)
  still goes through `queen.wake_batch_v2`, and so does everything a send could not
  deliver (the sibling's queue full, its socket gone): nothing is lost that NOTIFY would
  have delivered.

Why a sibling cannot miss a wake-up: the relay decides from the same copy as the
database call would, read at least as new as the epoch of the push or ack (targets.py);
a datagram that `sendto` accepted is in the sibling's socket queue, which its receiver
reads for as long as the process runs, as its listener would read a NOTIFY.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from queen_threads.wake.targets import WakeTargets

log = logging.getLogger("queen_threads.siblings")

Event = dict[str, Any]
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes, NUL-terminated
SHORT_TMP = "/tmp"
MAX_DATAGRAM = 65_536  # what the receiver reads at once; a relay's datagram stays below
ORIGIN_CHARS = 32  # a notifier's origin: uuid4().hex


def sibling_dir(instance_port: int) -> str:
    """The folder of an instance's sibling sockets: in the temp folder, or in /tmp when a
    deep TMPDIR would make the socket paths longer than the kernel allows (the worker
    would fail to boot with "AF_UNIX path too long")."""
    name = f"queen-threads-{instance_port}"
    longest = os.path.join(
        tempfile.gettempdir(), name, f"w{2**22}.{'0' * ORIGIN_CHARS}.sock"
    )  # pid_max
    if len(longest.encode()) <= SOCKET_PATH_MAX:
        return os.path.join(tempfile.gettempdir(), name)
    return os.path.join(SHORT_TMP, name)


CHECK_EVERY_S = 0.1


def origin_of(path: str) -> str | None:
    """The origin in a socket's name (`w<pid>.<origin>.sock`), None for `w<pid>.sock`."""
    parts = os.path.basename(path).split(".")
    return parts[1] if len(parts) == 3 and parts[1] else None


class SiblingBus:
    """Unix datagram sockets, one per worker process of this instance."""

    def __init__(self, instance_port: int, origin: str = "") -> None:
        self.dir = sibling_dir(instance_port)
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        name = f"w{os.getpid()}.{origin}.sock" if origin else f"w{os.getpid()}.sock"
        self.path = os.path.join(self.dir, name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        # The relay's sends never wait: a full queue is a failed send (and a NOTIFY).
        self._out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._out.settimeout(0.0)
        self._siblings: dict[str, str] = {}
        self._listed_at: int | None = None  # the folder's mtime when last listed
        self._checked_at = -1.0  # monotonic time of the last look at the folder

    def broadcast(self, event: dict[str, Any]) -> None:
        data = orjson.dumps(event)
        out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            for path in glob.glob(os.path.join(self.dir, "w*.sock")):
                if path == self.path:
                    continue
                try:
                    out.sendto(data, path)
                except (ConnectionRefusedError, FileNotFoundError):
                    with contextlib.suppress(OSError):
                        os.unlink(path)  # a worker that is gone
                except OSError as exc:
                    log.debug("relay to %s failed: %s", path, exc)
        finally:
            out.close()

    def siblings(self) -> dict[str, str]:
        """origin -> socket path of the other processes in the folder (listed again only
        when the folder changed: a socket bound or removed). The folder is looked at once
        per CHECK_EVERY_S at most (a relay call per push under load): a sibling bound since
        is reached through the database meanwhile, and one gone fails its send (and its
        events go through the database too)."""
        now = time.monotonic()
        if now - self._checked_at < CHECK_EVERY_S:
            return self._siblings
        self._checked_at = now
        try:
            listed_at = os.stat(self.dir).st_mtime_ns
        except OSError:
            return {}
        if listed_at != self._listed_at:
            found = {}
            for path in glob.glob(os.path.join(self.dir, "w*.sock")):
                origin = origin_of(path)
                if origin is not None and path != self.path:
                    found[origin] = path
            self._siblings, self._listed_at = found, listed_at
        return self._siblings

    def send(self, path: str, data: bytes) -> bool:
        """One datagram to a sibling, at once or not at all."""
        try:
            self._out.sendto(data, path)
            return True
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(OSError):
                os.unlink(path)  # a worker that is gone
        except OSError as exc:  # its queue is full (EAGAIN), or worse
            log.debug("wake-ups to %s not sent: %s", path, exc)
        return False

    def receive(self) -> dict[str, Any] | None:
        data = self.sock.recv(MAX_DATAGRAM)
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        return event if isinstance(event, dict) else None

    def close(self) -> None:
        self._out.close()
        self.sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def datagrams(events: list[Event], limit: int = MAX_DATAGRAM) -> list[tuple[bytes, list[Event]]]:
    """`{"wakes": [...]}` datagrams of at most `limit` bytes, with the events each carries
    (an event too large for one alone is in none: the caller NOTIFYs it)."""
    out: list[tuple[bytes, list[Event]]] = []
    parts: list[bytes] = []
    carried: list[Event] = []
    size = len(b'{"wakes":[]}')
    for event in events:
        part = orjson.dumps(event)
        if parts and size + len(part) + 1 > limit:
            out.append((b'{"wakes":[' + b",".join(parts) + b"]}", carried))
            parts, carried, size = [], [], len(b'{"wakes":[]}')
        if size + len(part) > limit:
            continue
        parts.append(part)
        carried.append(event)
        size += len(part) + 1
    if parts:
        out.append((b'{"wakes":[' + b",".join(parts) + b"]}", carried))
    return out


class SiblingRelay:
    """The notifier's relay: sends the events only siblings wait for over the bus and
    returns the rest, for the database. ``bus()`` is None until the bus is bound."""

    def __init__(self, targets: WakeTargets, bus: Callable[[], SiblingBus | None]) -> None:
        self.targets = targets
        self._bus = bus
        self._lock = threading.Lock()
        self.relayed = 0  # events handed to siblings (counted once per sibling)
        self.datagrams = 0
        self.fallbacks = 0  # events a send could not deliver: NOTIFYed instead

    def __call__(self, events: list[Event]) -> list[Event]:
        bus = self._bus()
        if bus is None or not events:
            return events
        copy = self.targets.current()
        if copy.scopes:  # the database matches namespace/task scopes: it sends everything
            return events
        reachable = bus.siblings()
        rest: dict[int, Event] = {}
        by_sibling: dict[str, list[Event]] = {}
        for event in events:
            waiting = copy.waiting(event.get("queue"))
            if not waiting or not waiting <= reachable.keys():
                rest[id(event)] = event  # out of reach (or the copy moved on): NOTIFY
                continue
            for origin in waiting:
                by_sibling.setdefault(origin, []).append(event)
        with self._lock:
            for origin, wakes in by_sibling.items():
                self._deliver(bus, reachable[origin], wakes, rest)
        return list(rest.values())

    def _deliver(
        self, bus: SiblingBus, path: str, wakes: list[Event], rest: dict[int, Event]
    ) -> None:
        packed = datagrams(wakes)
        unpacked = len(wakes) - sum(len(carried) for _, carried in packed)
        if unpacked:
            carried_ids = {id(event) for _, carried in packed for event in carried}
            for event in wakes:
                if id(event) not in carried_ids:
                    rest[id(event)] = event
            self.fallbacks += unpacked
        for data, carried in packed:
            if bus.send(path, data):
                self.datagrams += 1
                self.relayed += len(carried)
            else:
                self.fallbacks += len(carried)
                for event in carried:
                    rest[id(event)] = event

    def stats(self) -> dict[str, int]:
        return {"relayed": self.relayed, "datagrams": self.datagrams, "fallbacks": self.fallbacks}
