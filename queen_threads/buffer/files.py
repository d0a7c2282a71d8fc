"""The buffer folder: which files belong to which database, in what order, and the files
dead processes left behind.

- `failover-<db>-<ns>-<pid>-<seq>.buf.tmp`: the file a worker process is appending to.
  Every worker process has its own, so processes never interleave bytes. `<db>` tags the
  target database (host and database name of the DSN) so servers of different databases
  can share a folder without replaying into each other; `<ns>` is the wall-clock
  timestamp of its first event, so name order is time order.
- `....buf`: a closed file, ready for replay.
- `.creating-...`: a file being opened (it gets its `.tmp` name once its writer holds
  its lock).

The writer holds an exclusive `flock` on its open file. A `.tmp` file nobody holds a lock
on belongs to a process that died: the replayer closes it (renames it to `.buf`).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger("queen_threads.file_buffer")

NAME_RE = re.compile(
    r"^failover-(?P<tag>[0-9a-f]{10})-(?P<ns>\d{20})-(?P<pid>\d+)-(?P<seq>\d{6})"
    r"\.buf(?P<tmp>\.tmp)?$"
)
CREATING = ".creating-"


def database_tag(dsn: str) -> str:
    """A short stable tag of the target database: host + database name (not the port,
    which changes between runs of the embedded PostgreSQL; not the credentials)."""
    host = dbname = ""
    if dsn.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(dsn)
        query = parse_qs(parts.query)
        host = unquote(parts.hostname or "") or query.get("host", [""])[0]
        dbname = unquote(parts.path.lstrip("/")) or query.get("dbname", [""])[0]
    else:
        pairs = dict(re.findall(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)", dsn))
        host = pairs.get("host", "").strip("'")
        dbname = pairs.get("dbname", "").strip("'")
    host = host or os.environ.get("PGHOST", "") or "local"
    dbname = dbname or os.environ.get("PGDATABASE", "") or os.environ.get("PGUSER", "")
    return hashlib.sha1(f"{host}/{dbname}".encode()).hexdigest()[:10]


def name_prefix(tag: str) -> str:
    """What the name of every buffer file (and torn tail) of one database starts with."""
    return f"failover-{tag}-"


def file_stem(tag: str, ns: int, pid: int, seq: int) -> str:
    return f"{name_prefix(tag)}{ns:020d}-{pid}-{seq:06d}"


@dataclass(frozen=True, order=True)
class BufFile:
    """A buffer file; ordered by (first event time, pid, sequence)."""

    ns: int
    pid: int
    seq: int
    path: Path = field(compare=False)
    active: bool = field(default=False, compare=False)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.ns, self.pid, self.seq)

    @staticmethod
    def parse(path: Path, tag: str) -> BufFile | None:
        m = NAME_RE.match(path.name)
        if m is None or m["tag"] != tag:
            return None
        return BufFile(int(m["ns"]), int(m["pid"]), int(m["seq"]), path, m["tmp"] is not None)


def holds_files(folders: Iterable[Path], tag: str) -> bool:
    """Any buffer file of this database in these folders?"""
    prefix = name_prefix(tag)
    for folder in folders:
        try:
            if any(name.startswith(prefix) for name in os.listdir(folder)):
                return True
        except FileNotFoundError:
            continue
    return False


def scan(directory: Path, tag: str) -> tuple[list[BufFile], list[BufFile]]:
    """(closed files, files still being written) of our database, oldest first. Files
    left open by a dead process are closed here."""
    ready: list[BufFile] = []
    active: list[BufFile] = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return [], []
    for entry in entries:
        path = Path(entry.path)
        if entry.name.startswith(CREATING):
            _drop_stale_creating(path)
            continue
        f = BufFile.parse(path, tag)
        if f is None:
            continue
        if f.active:
            closed = _close_abandoned(f)
            if closed is None:
                active.append(f)
                continue
            f = closed
        ready.append(f)
    ready.sort()
    active.sort()
    return ready, active


def _close_abandoned(f: BufFile) -> BufFile | None:
    """Close (rename to .buf) a .tmp file whose writer is gone; None if it is alive."""
    final = f.path.with_suffix("")
    closed = BufFile(f.ns, f.pid, f.seq, final)
    try:
        fd = os.open(f.path, os.O_RDONLY)
    except FileNotFoundError:  # its writer closed it just now
        return closed if final.exists() else None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    try:
        os.rename(f.path, final)
        log.warning(
            "closed buffer file %s left open by process %s (stopped or killed)",
            final.name,
            f.pid,
        )
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)
    return closed


def _drop_stale_creating(path: Path) -> None:
    """A `.creating-` file (never written to) of a process that died while opening it."""
    try:
        if time.time() - path.stat().st_mtime < 60:
            return
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_size == 0:
            path.unlink()
    except OSError:
        pass
    finally:
        os.close(fd)
