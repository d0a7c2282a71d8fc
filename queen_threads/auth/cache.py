"""Tokens verified recently, so that a client sending the same token on every request
(as the official clients do) pays for one signature check a minute, not one per request.

An entry lives until the token's `exp` (plus the clock-skew leeway, as the check itself
allows) and at most `TTL_S`, so a key removed from the JWKS stops opening doors within a
minute. Only tokens that verified are kept, at most `SIZE` of them (the oldest go first).
"""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

SIZE = 4096
TTL_S = 60.0

T = TypeVar("T")


class VerifiedTokens(Generic[T]):
    def __init__(self, size: int = SIZE, ttl_s: float = TTL_S) -> None:
        self.size = size
        self.ttl_s = ttl_s
        self._entries: dict[str, tuple[T, float]] = {}
        self._lock = threading.Lock()

    def get(self, token: str) -> T | None:
        entry = self._entries.get(token)
        if entry is None:
            return None
        if time.time() < entry[1]:
            return entry[0]
        self._entries.pop(token, None)
        return None

    def put(self, token: str, value: T, expires_at: float) -> None:
        """Remember a verified token until `expires_at` (Unix time), TTL_S at most."""
        until = min(expires_at, time.time() + self.ttl_s)
        with self._lock:
            while len(self._entries) >= self.size:
                self._entries.pop(next(iter(self._entries)))
            self._entries[token] = (value, until)

    def __len__(self) -> int:
        return len(self._entries)
