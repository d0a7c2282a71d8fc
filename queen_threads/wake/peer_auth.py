"""The shared secret of peer notifications (`QUEEN_PEER_SECRET`).

HTTP: the sender puts the secret in the `X-Queen-Peer-Secret` header; the receiver
compares it in constant time and answers 401 (missing) or 403 (wrong).
UDP: a datagram is the JSON notification followed by the 32-byte HMAC-SHA256 of that JSON
keyed by the secret; a datagram whose tag is missing or wrong is dropped.
Without a secret both paths carry and accept the original, unauthenticated format, unless
the receiver is `closed` (JWT_ENABLED: an API that asks for tokens leaves no door open):
then every inbound notification is refused ("unset").
"""

from __future__ import annotations

import hashlib
import hmac

HEADER = "X-Queen-Peer-Secret"
TAG_SIZE = hashlib.sha256().digest_size


class PeerAuth:
    def __init__(self, secret: str, closed: bool = False) -> None:
        self._key = secret.encode("utf-8")
        self.closed = closed

    @property
    def enabled(self) -> bool:
        return bool(self._key)

    def headers(self) -> dict[str, str]:
        """Headers an outbound HTTP notification carries."""
        return {HEADER: self._key.decode("utf-8")} if self._key else {}

    def check_header(self, value: str | None) -> str | None:
        """None when an inbound HTTP notification may pass; else "missing", "wrong" or
        "unset" (closed without a secret)."""
        if not self._key:
            return "unset" if self.closed else None
        if not value:
            return "missing"
        if not hmac.compare_digest(value.encode("utf-8"), self._key):
            return "wrong"
        return None

    def sign(self, payload: bytes) -> bytes:
        """An outbound datagram: the payload and its tag (the payload alone without one)."""
        if not self._key:
            return payload
        return payload + self._tag(payload)

    def open(self, datagram: bytes) -> bytes | None:
        """The payload of an inbound datagram; None when its tag is missing or wrong (or
        when closed without a secret)."""
        if not self._key:
            return None if self.closed else datagram
        if len(datagram) <= TAG_SIZE:
            return None
        payload, tag = datagram[:-TAG_SIZE], datagram[-TAG_SIZE:]
        return payload if hmac.compare_digest(tag, self._tag(payload)) else None

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()
