"""Stable assignment of grouping keys to poll workers.

Python's built-in ``hash()`` of a string is salted per process (PYTHONHASHSEED), so it
would give different answers in different gunicorn workers and across restarts. CRC-32 is
stable everywhere, cheap, and spreads short keys evenly enough for a modulo.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable


def key_bytes(parts: Iterable[str | None]) -> bytes:
    """An unambiguous encoding of a key's parts: each is length-prefixed (``-`` for an
    unset part), so no choice of names makes two different keys encode alike."""
    out = bytearray()
    for part in parts:
        if part is None:
            out += b"-;"
        else:
            raw = part.encode("utf-8")
            out += b"%d:" % len(raw) + raw + b";"
    return bytes(out)


def shard_of(key: Iterable[str | None], count: int) -> int:
    """Return the index (``0 <= i < count``) of the poll worker that owns ``key``."""
    if count < 1:
        raise ValueError(f"shard count must be >= 1, got {count}")
    return zlib.crc32(key_bytes(key)) % count
