"""Stable assignment of grouping keys to poll workers.

Python's built-in ``hash()`` of a string is salted per process (PYTHONHASHSEED), so it
would give different answers in different gunicorn workers and across restarts. CRC-32 is
stable everywhere, cheap, and spreads short keys evenly enough for a modulo.
"""

from __future__ import annotations

import zlib


def shard_of(key: str, count: int) -> int:
    """Return the index (``0 <= i < count``) of the poll worker that owns ``key``."""
    if count < 1:
        raise ValueError(f"shard count must be >= 1, got {count}")
    return zlib.crc32(key.encode("utf-8")) % count
