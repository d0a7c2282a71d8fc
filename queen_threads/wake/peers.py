"""Wake-ups between server instances over HTTP (`QUEEN_PEERS`) and UDP (`QUEEN_UDP_PEERS`).

PostgreSQL LISTEN/NOTIFY already reaches every process of every instance; peers are the
seed's extra, database-free path. Outbound: local pushes and freed leases are queued,
de-duplicated within `PEER_NOTIFY_BATCH_MS`, and sent to each peer (one JSON notification
per POST to `/internal/api/notify`, or per UDP datagram). Every HTTP peer has a worker of
its own with a 0.5 s timeout (peer_sender.py), so a dead peer delays no other. Inbound: a
notification reaches one worker process of the instance (whichever accepted it), which
applies it and relays it to its sibling processes over Unix datagram sockets, so every
waiter is woken (the same sockets carry this instance's own wake-ups: wake/siblings.py).
With `QUEEN_PEER_SECRET` set, notifications carry the secret (HTTP header) or an
HMAC-SHA256 tag (UDP), and those without a valid one are dropped and counted (peer_auth.py).
The UDP receiver binds `QUEEN_UDP_BIND` (loopback unless configured).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import orjson

from queen_threads.errors import ValidationError
from queen_threads.wake.peer_auth import PeerAuth
from queen_threads.wake.peer_sender import HttpPeer
from queen_threads.wake.siblings import SiblingBus, SiblingRelay

log = logging.getLogger("queen_threads.peers")

Apply = Callable[[dict[str, Any], str], None]
TYPES = {"message_available": "push", "partition_free": "free"}
KINDS = {kind: wire for wire, kind in TYPES.items()}
MAX_DATAGRAM = 4096


def to_wire(event: dict[str, Any]) -> dict[str, Any]:
    """Internal event -> the original's notification body."""
    body = {
        "type": KINDS[event["kind"]],
        "queue": event["queue"],
        "partition": event.get("partition"),
        "ts": int(time.time() * 1000),
    }
    if event["kind"] == "free":
        body["consumer_group"] = event.get("consumerGroup")
    return body


def from_wire(body: Any) -> dict[str, Any] | None:
    """A notification body -> internal event; None for heartbeats. ValidationError if bad."""
    if not isinstance(body, dict):
        raise ValidationError("notification must be a JSON object")
    kind = body.get("type")
    if kind == "heartbeat":
        return None
    if kind not in TYPES:
        raise ValidationError("type must be message_available, partition_free or heartbeat")
    queue, partition = body.get("queue"), body.get("partition")
    group = body.get("consumer_group")
    if not isinstance(queue, str) or not queue:
        raise ValidationError("queue is required")
    if partition is not None and not isinstance(partition, str):
        raise ValidationError("partition must be a string")
    if group is not None and not isinstance(group, str):
        raise ValidationError("consumer_group must be a string")
    return {"kind": TYPES[kind], "queue": queue, "partition": partition, "consumerGroup": group}


def is_self(url: str, host: str, port: int) -> bool:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    local = {"localhost", "127.0.0.1", "0.0.0.0", "::1", host, socket.gethostname()}
    return parts.hostname in local and (parts.port or 80) == port


def udp_address(peer: str, default_port: int) -> tuple[str, int]:
    peer = peer.split("://", 1)[-1].rstrip("/")
    host, _, port = peer.rpartition(":") if ":" in peer else (peer, "", "")
    return (host or peer), int(port) if port else default_port


class PeerService:
    """Outbound notifier + inbound UDP receiver + sibling relay of one worker process."""

    def __init__(
        self,
        apply: Apply,
        *,
        http_peers: tuple[str, ...],
        udp_peers: tuple[str, ...],
        udp_port: int,
        batch_ms: int,
        host: str,
        port: int,
        secret: str = "",
        udp_bind: str = "127.0.0.1",
        closed: bool = False,
        origin: str = "",
    ) -> None:
        self.apply = apply
        self.origin = origin  # names this process's sibling socket (wake/siblings.py)
        self.auth = PeerAuth(secret, closed)
        self.http_peers = [p.rstrip("/") for p in http_peers if not is_self(p, host, port)]
        self._http = [HttpPeer(url, self.auth.headers()) for url in self.http_peers]
        self.udp_peers = [udp_address(p, udp_port) for p in udp_peers]
        self.udp_port = udp_port
        self.udp_bind = udp_bind
        self.batch_s = batch_ms / 1000.0
        self.port = port
        self.sent = self.received = self.errors = 0  # UDP sent/errors; received: both
        self.rejected = {"http": 0, "udp": 0}
        self._pending: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._bus: SiblingBus | None = None
        self.relay: SiblingRelay | None = None  # the notifier's, for its counts (stats)
        self._udp: socket.socket | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.http_peers or self.udp_peers)

    @property
    def bus(self) -> SiblingBus | None:
        """This process's sibling socket, once bound (start)."""
        return self._bus

    # -- outbound ---------------------------------------------------------------------
    def __call__(self, event: dict[str, Any]) -> None:
        """A local push or freed lease: queue it for the peers (de-duplicated)."""
        if not self.enabled:
            return
        key = (event["kind"], event["queue"], event.get("partition"), event.get("consumerGroup"))
        with self._lock:
            self._pending[key] = event
        self._wake.set()

    def _sender(self) -> None:
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        while not self._stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            self._stop.wait(self.batch_s)
            with self._lock:
                pending, self._pending = self._pending, {}
            if not pending:
                continue
            bodies = {key: orjson.dumps(to_wire(event)) for key, event in pending.items()}
            for peer in self._http:  # each peer's own worker sends (no peer waits for another)
                peer.offer(bodies)
            for body in bodies.values():
                datagram = self.auth.sign(body)
                for addr in self.udp_peers:
                    try:
                        udp.sendto(datagram, addr)
                        self.sent += 1
                    except OSError:
                        self.errors += 1
        udp.close()

    # -- inbound ----------------------------------------------------------------------
    def reject(self, transport: str) -> None:
        """A notification without a valid secret or tag: counted and dropped."""
        self.rejected[transport] += 1

    def receive(self, event: dict[str, Any]) -> None:
        """A notification from a peer (HTTP or UDP): apply here and relay to siblings."""
        self.received += 1
        self.apply(event, "peer")
        if self._bus is not None:
            self._bus.broadcast(event)

    def _udp_receiver(self) -> None:
        assert self._udp is not None
        while not self._stop.is_set():
            try:
                data = self._udp.recv(MAX_DATAGRAM + 64)
            except OSError:
                if self._stop.is_set():
                    return
                continue
            payload = self.auth.open(data)
            if payload is None:
                self.reject("udp")
                continue
            try:
                event = from_wire(orjson.loads(payload))
            except (orjson.JSONDecodeError, ValidationError):
                continue
            if event is not None:
                self.receive(event)

    def _bus_receiver(self) -> None:
        assert self._bus is not None
        while not self._stop.is_set():
            try:
                event = self._bus.receive()
            except OSError:
                return
            if event is None:
                continue
            wakes = event.get("wakes")
            if isinstance(wakes, list):  # a sibling's push or ack (wake/siblings.py)
                for wake in wakes:
                    if isinstance(wake, dict):
                        self.apply(wake, "sibling")
            else:  # a peer's notification, relayed
                self.apply(event, "peer")

    def start(self) -> None:
        self._bus = SiblingBus(self.port, self.origin)
        self._spawn(self._bus_receiver, "queen-siblings")
        if self.auth.closed and not self.auth.enabled:
            log.warning(
                "JWT_ENABLED is true and QUEEN_PEER_SECRET is not set: notifications from "
                "peers are refused (long polls rely on LISTEN/NOTIFY); set QUEEN_PEER_SECRET"
            )
        elif self.enabled and not self.auth.enabled:
            log.warning(
                "peer notifications are unauthenticated: set QUEEN_PEER_SECRET (the same on "
                "every instance) so that only peers can wake long polls"
            )
        if self.enabled:
            self._spawn(self._sender, "queen-peer-sender")
        for peer in self._http:
            peer.start()
        if self.udp_peers:
            family = socket.AF_INET6 if ":" in self.udp_bind else socket.AF_INET
            self._udp = socket.socket(family, socket.SOCK_DGRAM)
            self._udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            self._udp.bind((self.udp_bind, self.udp_port))
            self._spawn(self._udp_receiver, "queen-udp")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        threading.Thread(target=target, name=name, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for peer in self._http:
            peer.stop()
        for closable in (self._udp, self._bus):
            if closable is not None:
                with contextlib.suppress(OSError):
                    closable.close()

    def stats(self) -> dict[str, object]:
        return {
            "httpPeers": self.http_peers,
            "udpPeers": [f"{h}:{p}" for h, p in self.udp_peers],
            "sent": self.sent + sum(p.sent for p in self._http),
            "received": self.received,
            "errors": self.errors + sum(p.errors for p in self._http),
            "dropped": sum(p.dropped for p in self._http),
            "rejected": dict(self.rejected),
            "authenticated": self.auth.enabled,
            "udpBind": f"{self.udp_bind}:{self.udp_port}" if self.udp_peers else None,
            "siblingRelay": self.relay.stats() if self.relay is not None else None,
        }
