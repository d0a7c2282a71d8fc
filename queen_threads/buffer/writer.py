"""Appending to this process's buffer file: one push request = one write() + one fsync(),
and a request is answered only after its fsync. A file is closed (renamed from `.tmp` to
`.buf`) after FILE_BUFFER_EVENTS_PER_FILE events, or once it has been idle for
2 x FILE_BUFFER_FLUSH_MS."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import threading
import time
from pathlib import Path
from typing import Any

from queen_threads.buffer.files import CREATING, file_stem
from queen_threads.buffer.records import encode_record

_FILE_SEQ = itertools.count(1)  # file numbers, unique within the process


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class BufferWriter:
    """Appends events to this process's current buffer file, durably (write + fsync)."""

    def __init__(self, directory: Path, tag: str, events_per_file: int) -> None:
        self.directory = directory
        self.tag = tag
        self.events_per_file = events_per_file
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._last_ts = 0
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0
        self._count = 0
        self._last_write = 0.0

    def _next_ts(self) -> int:
        # Strictly increasing per process: the replayer's merge relies on it.
        self._last_ts = max(self._last_ts + 1, time.time_ns())
        return self._last_ts

    def append(self, events: list[dict[str, Any]]) -> None:
        """Write every event in one write() and fsync() it; raises OSError on failure."""
        if not events:
            return
        with self._lock:
            stamped = [{"ts": self._next_ts(), **event} for event in events]
            if self._fd is not None and os.fstat(self._fd).st_nlink == 0:
                os.close(self._fd)  # someone deleted the open file: start a new one
                self._fd = self._path = None
            if self._fd is None:
                self._open(stamped[0]["ts"])
            assert self._fd is not None
            data = b"".join(encode_record(e) for e in stamped)
            try:
                _write_all(self._fd, data)
                os.fsync(self._fd)
            except OSError:
                # Cut a partial write off (so the file stays well formed), close the file
                # (its state after a failed fsync is unknown) and let the client retry.
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._size)
                self._rotate()
                raise
            self._size += len(data)
            self._count += len(stamped)
            self._last_write = time.monotonic()
            if self._count >= self.events_per_file:
                self._rotate()

    def _open(self, ns: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        seq = next(_FILE_SEQ) % 1_000_000
        name = file_stem(self.tag, ns, self.pid, seq)
        # Lock before the file gets its real name: a replayer that sees the `.tmp` name
        # must never find it unlocked while this process is alive.
        creating = self.directory / f"{CREATING}{name}"
        fd = os.open(creating, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path = self.directory / f"{name}.buf.tmp"
            os.rename(creating, path)
            _fsync_dir(self.directory)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                creating.unlink()
            raise
        self._fd, self._path, self._size, self._count = fd, path, 0, 0

    def _rotate(self) -> None:
        if self._fd is None or self._path is None:
            return
        with contextlib.suppress(OSError):  # if this fails the file is closed as abandoned
            os.rename(self._path, self._path.with_suffix(""))
        os.close(self._fd)
        self._fd = self._path = None

    def rotate_if_idle(self, idle_s: float) -> None:
        with self._lock:
            if self._fd is not None and time.monotonic() - self._last_write >= idle_s:
                self._rotate()

    def close(self) -> None:
        with self._lock:
            self._rotate()
