"""Switches that every worker process of one instance reads from the same memory.

A `SharedFlags` made in gunicorn's master before it forks (`share_between_workers()`,
called by config/gunicorn.conf.py) is one anonymous shared memory page that all its
workers inherit: a switch one worker stores is what every other worker reads next, with
no message and no wait. Made anywhere else (a test's in-process app) it is this process's
own.

Each flag holds a value and the version it was stored with (the database's, see
background/maintenance.py); a store with an older version than the one held is dropped,
so a worker that read the database just before a switch cannot undo it. Reading a value
is one byte of the page (the pop path's whole cost); storing takes a lock shared by the
processes (a POSIX semaphore), held for a few microseconds.
"""

from __future__ import annotations

import mmap
import multiprocessing
import struct
import threading
from typing import Any

VERSION = struct.Struct("<q")
VERSIONS_AT = 8  # the values are bytes 0..7, their versions 8-byte words from here


class SharedFlags:
    """`slots` boolean flags with versions, in memory shared with forked children."""

    def __init__(self, slots: int, *, between_processes: bool) -> None:
        if not 0 < slots <= VERSIONS_AT:
            raise ValueError(f"1 to {VERSIONS_AT} flags, not {slots}")
        self.slots = slots
        self.between_processes = between_processes
        # the values, one byte each: `memory[slot] == 1` is the fastest read there is
        self.memory = mmap.mmap(-1, VERSIONS_AT + VERSION.size * slots)  # MAP_SHARED
        self._lock: Any = multiprocessing.Lock() if between_processes else threading.Lock()

    def value(self, slot: int) -> bool:
        return self.memory[slot] == 1

    def version(self, slot: int) -> int:
        return int(VERSION.unpack_from(self.memory, VERSIONS_AT + VERSION.size * slot)[0])

    def store(self, slot: int, value: bool, version: int) -> bool:
        """Hold `value` unless a newer version is held already; True when it was stored."""
        with self._lock:
            if version < self.version(slot):
                return False
            VERSION.pack_into(self.memory, VERSIONS_AT + VERSION.size * slot, version)
            self.memory[slot] = 1 if value else 0
            return True


_shared: SharedFlags | None = None
MAINTENANCE_SLOTS = 2  # push, pop (background/maintenance.py)


def share_between_workers() -> None:
    """In gunicorn's master, before the workers are forked: they inherit one page."""
    global _shared
    _shared = SharedFlags(MAINTENANCE_SLOTS, between_processes=True)


def maintenance_flags() -> SharedFlags:
    """The instance's page when the master made one, otherwise one of this process."""
    return (
        _shared if _shared is not None else SharedFlags(MAINTENANCE_SLOTS, between_processes=False)
    )
