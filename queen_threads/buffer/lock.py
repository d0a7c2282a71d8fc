"""The replay lock: one replayer per host and database.

Every worker process tries to take the non-blocking exclusive `flock` on
`replay-<db>.lock` every tick; the one that holds it replays, so replay goes on if that
process dies (the kernel releases a dead process's flock). The file holds the holder's pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


class HostLock:
    """A non-blocking exclusive flock on a file; released when the process dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            try:  # still the file at that path (nobody deleted it meanwhile)?
                if os.fstat(self._fd).st_ino == os.stat(self.path).st_ino:
                    return True
            except OSError:
                pass
            self.release()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def holder_pid(self) -> int | None:
        """The pid of the process holding the lock (None when nobody holds it)."""
        if self._fd is not None:
            return os.getpid()
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:  # held: the file names the holder
                text = os.pread(fd, 32, 0).decode(errors="replace").strip()
                return int(text) if text.isdigit() else None
            return None  # free (the pid in the file is a past holder's)
        finally:
            os.close(fd)
