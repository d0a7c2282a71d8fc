"""Failover file buffer: pushes that cannot reach PostgreSQL are kept in local files and
replayed, in push order, once the database answers again. Nothing acknowledged is lost,
even when the server is killed meanwhile.

Files (all in FILE_BUFFER_DIR):

- `failover-<db>-<ns>-<pid>-<seq>.buf.tmp`: the file a worker process is appending to.
  Every worker process has its own, so processes never interleave bytes. `<db>` tags the
  target database (host and database name of the DSN) so servers of different databases
  can share a folder without replaying into each other; `<ns>` is the wall-clock
  timestamp of its first event, so name order is time order.
- `....buf`: a closed file, ready for replay. A file is closed after
  FILE_BUFFER_EVENTS_PER_FILE events, or once it has been idle for 2 x FILE_BUFFER_FLUSH_MS.
- `failed/`: files whose events the database rejected for a reason other than being
  unreachable (e.g. a queue at its maxSize); retried with a growing delay, never dropped.
- `torn/`: the bytes of a torn last record (a write the process died in), kept for
  inspection; its request was never acknowledged, so nothing acknowledged is in there.
- `replay-<db>.lock`: the replayer's lock (holds its pid).

Record format: 12-byte header (`QBF1`, u32 length, u32 CRC-32 of the body, little
endian) then the JSON body `{ts, queue, partition, payload, transactionId, traceId,
producerSub}`. One push request = one write() + one fsync(); a request is answered only
after its fsync. A record that is incomplete, fails its checksum or is not valid JSON ends
the readable part of a file: it and everything after it is the torn tail.

The writer holds an exclusive `flock` on its open file. A `.tmp` file nobody holds a lock
on belongs to a process that died: the replayer closes it (renames it to `.buf`).

Replay: every worker process runs a background thread (a greenlet under gevent); the one
that holds the non-blocking exclusive `flock` on the lock file replays, the others retry
to take it every tick, so replay goes on if that process dies. The replayer merges the
closed files by event timestamp (each process's timestamps are strictly increasing),
never passing an event that is newer than the first event of a file still being written,
and pushes FILE_BUFFER_MAX_BATCH events per `store.push` call. The push is idempotent
by transactionId (a `duplicate` answer counts as success), so replaying an event twice
stores it once. A file is deleted only after all its events are committed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import heapq
import itertools
import logging
import os
import re
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from queen_threads.errors import DatabaseError, DatabaseUnavailable, Unavailable
from queen_threads.background.maintenance import Maintenance
from queen_threads.settings import Settings
from queen_threads.store import QueueStore

log = logging.getLogger("queen_threads.file_buffer")

DEFAULT_DIR = ".queen-data/buffers"
MAGIC = b"QBF1"
HEADER = struct.Struct("<4sII")
MAX_RECORD = 1 << 30
OK_STATUSES = ("queued", "duplicate")
MAX_OPEN_FILES = 64  # files merged at once; later ones wait (their first event bounds us)
SLICE_S = 1.0  # longest replay pass before the loop looks at stop/maintenance again
FAILED_RETRY_S = 5.0  # first retry of a failed file; doubles per attempt
FAILED_RETRY_MAX_S = 300.0
MAX_LISTED_FILES = 100  # files named in the status (the counts cover all)
PROBE_S = 1.0  # while unhealthy, how often a non-replaying process pings the database
SCAN_EVERY_S = 1.0  # how often an idle process lists the buffer folders for files
NAME_RE = re.compile(
    r"^failover-(?P<tag>[0-9a-f]{10})-(?P<ns>\d{20})-(?P<pid>\d+)-(?P<seq>\d{6})"
    r"\.buf(?P<tmp>\.tmp)?$"
)

PushFn = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
_FILE_SEQ = itertools.count(1)  # file numbers, unique within the process
Pairs = list[tuple[str, str]]


# -- names and records --------------------------------------------------------------------
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


def encode_record(event: dict[str, Any]) -> bytes:
    body = orjson.dumps(event)
    return HEADER.pack(MAGIC, len(body), zlib.crc32(body)) + body


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


@dataclass
class Record:
    index: int  # position in its file
    end: int  # file offset just after it
    event: dict[str, Any]


@dataclass
class TornTail:
    offset: int
    size: int
    reason: str


class RecordReader:
    """Complete records of one file, from `offset` on; stops at EOF or at a torn record."""

    def __init__(self, path: Path, offset: int = 0, index: int = 0) -> None:
        self.path = path
        self._f = path.open("rb")
        self._f.seek(offset)
        self.offset = offset
        self.index = index
        self.torn: TornTail | None = None

    def next(self) -> Record | None:
        head = self._f.read(HEADER.size)
        if not head:
            return None
        if len(head) < HEADER.size:
            self._tear("incomplete record header")
            return None
        magic, length, crc = HEADER.unpack(head)
        if magic != MAGIC or length > MAX_RECORD:
            self._tear("invalid record header")
            return None
        body = self._f.read(length)
        if len(body) < length:
            self._tear(f"incomplete record ({len(body)} of {length} bytes)")
            return None
        if zlib.crc32(body) != crc:
            self._tear("record checksum mismatch")
            return None
        try:
            event = orjson.loads(body)
        except orjson.JSONDecodeError:
            self._tear("record is not valid JSON")
            return None
        if not isinstance(event, dict) or not all(
            isinstance(event.get(k), str) for k in ("queue", "transactionId")
        ):
            self._tear("record is not a buffered push")
            return None
        record = Record(self.index, self.offset + HEADER.size + length, event)
        self.offset = record.end
        self.index += 1
        return record

    def _tear(self, reason: str) -> None:
        size = os.fstat(self._f.fileno()).st_size
        self.torn = TornTail(self.offset, max(0, size - self.offset), reason)

    def close(self) -> None:
        self._f.close()


def count_records(path: Path) -> int:
    """Complete records in a file (headers only, bodies skipped: cheap enough for status)."""
    count = 0
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            offset = 0
            while offset + HEADER.size <= size:
                magic, length, _ = HEADER.unpack(f.read(HEADER.size))
                if magic != MAGIC or offset + HEADER.size + length > size:
                    break
                offset += HEADER.size + length
                f.seek(offset)
                count += 1
    except (FileNotFoundError, struct.error):
        pass
    return count


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


# -- writing (every worker process) -------------------------------------------------------
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
        name = f"failover-{self.tag}-{ns:020d}-{self.pid}-{seq:06d}"
        # Lock before the file gets its real name: a replayer that sees the `.tmp` name
        # must never find it unlocked while this process is alive.
        creating = self.directory / f".creating-{name}"
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

    @property
    def active_name(self) -> str | None:
        return self._path.name if self._path is not None else None


# -- the replay lock (one replayer per host and database) ---------------------------------
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


class _DatabaseDown(Exception):
    """Replay stops: PostgreSQL is unreachable again."""


@dataclass
class _Source:
    """A file being replayed."""

    file: BufFile
    reader: RecordReader
    in_failed_dir: bool
    inflight: int = 0  # records taken from the file and not yet committed
    exhausted: bool = False
    failed: bool = False
    done: bool = False


@dataclass
class FailedInfo:
    error: str
    attempts: int = 0
    next_try: float = 0.0


# -- the service ----------------------------------------------------------------------------
class FileBuffer:
    """Buffer pushes when PostgreSQL is down (or in maintenance mode) and replay them."""

    def __init__(
        self,
        settings: Settings,
        dsn: str,
        store: QueueStore,
        maintenance: Maintenance,
        on_replayed: Callable[[Pairs], None] | None = None,
        ready: Callable[[], bool] = lambda: True,
        ping: Callable[[], bool] | None = None,
    ) -> None:
        self.directory = Path(os.path.abspath(settings.file_buffer_dir or DEFAULT_DIR))
        self.failed_dir = self.directory / "failed"
        self.torn_dir = self.directory / "torn"
        self.tag = database_tag(dsn)
        self.store = store
        self.maintenance = maintenance
        self.on_replayed = on_replayed
        self.ready = ready
        self.ping = ping
        self.flush_s = settings.file_buffer_flush_ms / 1000
        self.max_batch = settings.file_buffer_max_batch
        self.writer = BufferWriter(self.directory, self.tag, settings.file_buffer_events_per_file)
        self.lock = HostLock(self.directory / f"replay-{self.tag}.lock")
        self.db_healthy = True
        self.last_error: str | None = None
        self.writable = True
        self.buffered = 0  # events this process buffered
        self.replayed = 0  # events this process replayed (queued + duplicate)
        self.duplicates = 0
        self.torn_tails = 0
        self._progress: dict[str, tuple[int, int]] = {}  # file name -> (offset, index)
        self._failed: dict[str, FailedInfo] = {}
        self._count_cache: dict[str, tuple[int, int, int]] = {}
        self._last_probe = 0.0
        self._next_scan = 0.0  # folder listings are throttled while nothing is buffered
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="queen-file-buffer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.writer.close()
        self.lock.release()

    def _run(self) -> None:
        try:
            self._make_dirs()
        except OSError as exc:
            log.error("failover buffer folder %s is not usable: %s", self.directory, exc)
        while not self._stop.is_set():
            busy = False
            try:
                busy = self.tick()
            except Exception:
                log.exception("failover buffer background pass failed")
            self._stop.wait(0.001 if busy else self.flush_s)

    def _make_dirs(self) -> None:
        for d in (self.directory, self.failed_dir, self.torn_dir):
            d.mkdir(parents=True, exist_ok=True)

    def tick(self) -> bool:
        """One background pass: close an idle file, keep the health view fresh, and replay
        if this process holds the lock. True when more replay work is waiting."""
        self.writer.rotate_if_idle(2 * self.flush_s)
        if not self.db_healthy and self.ping is not None:
            now = time.monotonic()
            if now - self._last_probe >= PROBE_S:
                self._last_probe = now
                if self.ping():
                    self._set_healthy(True)
        if not self.lock.held and not self._has_files():
            return False  # nothing to replay: no need to compete for the lock
        try:
            if not self.lock.try_acquire():
                return False
        except OSError as exc:
            log.debug("replay lock not taken: %s", exc)
            return False
        return self.replay_once()

    def _has_files(self) -> bool:
        """Any buffer file of this database? Lists the folders at most once a second
        (files of other or dead processes are found within that); this process's own
        writes make the next tick look at once."""
        now = time.monotonic()
        if now < self._next_scan:
            return False
        self._next_scan = now + SCAN_EVERY_S
        prefix = f"failover-{self.tag}-"
        for folder in (self.directory, self.failed_dir):
            try:
                if any(name.startswith(prefix) for name in os.listdir(folder)):
                    return True
            except FileNotFoundError:
                continue
        return False

    # -- push path ---------------------------------------------------------------------------
    def push(self, items: list[dict[str, Any]], direct: PushFn) -> list[dict[str, Any]]:
        """Push through `direct` (the database); buffer when it is unreachable, when its
        schema is not applied yet, or when maintenance mode is on. `direct` gets copies
        (the store may encrypt in place)."""
        if self.maintenance.push_on:
            return self.buffer(items, "maintenance mode is on")
        try:
            results = direct([dict(item) for item in items])
        except DatabaseUnavailable as exc:
            self._set_healthy(False, str(exc))
            return self.buffer(items, str(exc))
        except DatabaseError as exc:
            if self.ready():
                raise
            # The database answers but this process has not applied the schema yet (a
            # first start during an outage): keep the push; it is replayed once it is.
            return self.buffer(items, f"database schema not ready yet: {exc}")
        self._set_healthy(True)
        return results

    def buffer(self, items: list[dict[str, Any]], reason: str) -> list[dict[str, Any]]:
        """Append the items durably; per-item `buffered` results in request order."""
        events = [
            {
                "queue": item["queue"],
                "partition": item["partition"],
                "payload": item.get("payload"),
                "transactionId": item["transactionId"],
                "traceId": item.get("traceId"),
                "producerSub": item.get("producerSub"),
            }
            for item in items
        ]
        try:
            self.writer.append(events)
        except OSError as exc:
            self.writable = False
            log.error("failover buffer write failed (%s): %s", reason, exc)
            raise Unavailable(
                f"{reason}; the failover buffer could not store the push either: {exc}", 1
            ) from exc
        self.writable = True
        self.buffered += len(events)
        self._next_scan = 0.0
        return [
            {
                "index": i,
                "status": "buffered",
                "queue": e["queue"],
                "partition": e["partition"],
                "transactionId": e["transactionId"],
                "transaction_id": e["transactionId"],
            }
            for i, e in enumerate(events)
        ]

    def _set_healthy(self, healthy: bool, error: str | None = None) -> None:
        if healthy != self.db_healthy:
            if healthy:
                log.warning("database reachable again; buffered pushes will be replayed")
            else:
                log.warning("database unreachable, pushes go to the failover buffer: %s", error)
        self.db_healthy = healthy
        if error is not None:
            self.last_error = error

    # -- replay -------------------------------------------------------------------------------
    def replay_once(self) -> bool:
        """One bounded replay pass (the caller holds the lock). True when it committed
        events and more may be waiting."""
        if self._stop.is_set() or self.maintenance.push_on or not self.ready():
            return False
        try:
            moved = self._replay_main()
            self._retry_failed()
        except _DatabaseDown:
            return False
        return moved

    def _paused(self) -> bool:
        return self._stop.is_set() or self.maintenance.push_on

    def _scan(self) -> tuple[list[BufFile], list[BufFile]]:
        """(closed files, files still being written) of our database, oldest first. Files
        left open by a dead process are closed here."""
        ready: list[BufFile] = []
        active: list[BufFile] = []
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return [], []
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith(".creating-"):
                self._drop_stale_creating(path)
                continue
            f = BufFile.parse(path, self.tag)
            if f is None:
                continue
            if f.active:
                closed = self._close_abandoned(f)
                if closed is None:
                    active.append(f)
                    continue
                f = closed
            ready.append(f)
        ready.sort()
        active.sort()
        return ready, active

    def _close_abandoned(self, f: BufFile) -> BufFile | None:
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

    def _drop_stale_creating(self, path: Path) -> None:
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

    def _replay_main(self) -> bool:
        ready, active = self._scan()
        known = {f.name for f in ready}
        self._progress = {k: v for k, v in self._progress.items() if k in known}
        if not ready:
            return False
        window, later = ready[:MAX_OPEN_FILES], ready[MAX_OPEN_FILES:]
        # No event of a file outside the window (or still being written) may be passed:
        # each of their events sorts after (first event time, file) of that file.
        bounds = [(f.ns, f.key, -1) for f in (*later, *active)]
        horizon = min(bounds) if bounds else None
        sources: list[_Source] = []
        heap: list[tuple[tuple[int, tuple[int, int, int], int], int, Record]] = []
        committed = 0
        try:
            for f in window:
                offset, index = self._progress.get(f.name, (0, 0))
                try:
                    reader = RecordReader(f.path, offset, index)
                except FileNotFoundError:
                    continue
                source = _Source(f, reader, in_failed_dir=False)
                sources.append(source)
                self._advance(len(sources) - 1, source, heap)
            self._finish_done(sources)
            deadline = time.monotonic() + SLICE_S
            batch: list[tuple[int, Record]] = []
            while heap and not self._paused():
                key, si, record = heap[0]
                if horizon is not None and key >= horizon:
                    break
                heapq.heappop(heap)
                source = sources[si]
                if source.failed:
                    continue
                batch.append((si, record))
                source.inflight += 1
                self._advance(si, source, heap)
                if len(batch) >= self.max_batch:
                    committed += self._flush(batch, sources)
                    batch = []
                    if time.monotonic() > deadline:
                        break
            if batch and not self._paused():
                committed += self._flush(batch, sources)
        finally:
            for source in sources:
                source.reader.close()
        return committed > 0

    def _advance(self, si: int, source: _Source, heap: list[Any]) -> None:
        record = source.reader.next()
        if record is None:
            source.exhausted = True
            return
        ts = record.event.get("ts")
        key = (ts if isinstance(ts, int) else source.file.ns, source.file.key, record.index)
        heapq.heappush(heap, (key, si, record))

    def _flush(self, batch: list[tuple[int, Record]], sources: list[_Source]) -> int:
        """Push one batch; returns the number of events committed."""
        items = [_item(record.event) for _, record in batch]
        try:
            results = self.store.push(items)
            if len(results) != len(items):
                raise RuntimeError(f"push answered {len(results)} results for {len(items)}")
        except DatabaseUnavailable as exc:
            self._set_healthy(False, str(exc))
            raise _DatabaseDown from exc
        except Exception as exc:
            # The whole call was rolled back: find the culprits one event at a time.
            log.warning("replay batch rejected (%s); retrying its events one by one", exc)
            return self._flush_one_by_one(batch, sources)
        self._set_healthy(True)
        committed = self._settle(batch, results, sources)
        self._finish_done(sources)
        return committed

    def _flush_one_by_one(self, batch: list[tuple[int, Record]], sources: list[_Source]) -> int:
        committed = 0
        for si, record in batch:
            source = sources[si]
            if source.failed:
                continue
            try:
                results = self.store.push([_item(record.event)])
            except DatabaseUnavailable as exc:
                self._set_healthy(False, str(exc))
                raise _DatabaseDown from exc
            except Exception as exc:
                self._fail(source, f"{type(exc).__name__}: {exc}")
                continue
            committed += self._settle([(si, record)], results, sources)
        self._finish_done(sources)
        return committed

    def _settle(
        self,
        batch: list[tuple[int, Record]],
        results: list[dict[str, Any]],
        sources: list[_Source],
    ) -> int:
        committed = 0
        woken: Pairs = []
        for (si, record), result in zip(batch, results, strict=True):
            source = sources[si]
            status = result.get("status")
            if status not in OK_STATUSES:
                self._fail(source, str(result.get("error") or f"status {status}"))
                continue
            committed += 1
            source.inflight -= 1
            if not source.failed:
                self._progress[source.file.name] = (record.end, record.index + 1)
            if status == "queued":
                woken.append((record.event["queue"], record.event.get("partition") or "Default"))
            else:
                self.duplicates += 1
        self.replayed += committed
        if woken and self.on_replayed is not None:
            try:
                self.on_replayed(list(dict.fromkeys(woken)))
            except Exception:
                log.exception("waking consumers after a replay failed")
        return committed

    def _fail(self, source: _Source, error: str) -> None:
        """The database refused an event of this file: set the whole file aside."""
        if source.failed:
            return
        source.failed = True
        self._progress.pop(source.file.name, None)
        info = self._failed.setdefault(source.file.name, FailedInfo(error))
        info.error = error
        info.attempts += 1
        info.next_try = time.monotonic() + min(
            FAILED_RETRY_S * 2 ** (info.attempts - 1), FAILED_RETRY_MAX_S
        )
        if source.in_failed_dir:
            log.warning("buffer file failed/%s still rejected: %s", source.file.name, error)
            return
        try:
            self.failed_dir.mkdir(parents=True, exist_ok=True)
            os.rename(source.file.path, self.failed_dir / source.file.name)
        except OSError as exc:
            log.error("could not move %s to failed/: %s", source.file.name, exc)
            return
        log.error(
            "buffer file %s moved to failed/ (it will be retried): %s", source.file.name, error
        )

    def _finish_done(self, sources: Iterable[_Source]) -> None:
        """Delete the files whose every event is committed (keeping a torn tail aside)."""
        for source in sources:
            if source.done or source.failed or not source.exhausted or source.inflight:
                continue
            source.done = True
            torn = source.reader.torn
            if torn is not None and torn.size > 0:
                self._keep_torn_tail(source.file, torn)
            with contextlib.suppress(FileNotFoundError):
                source.file.path.unlink()
            self._progress.pop(source.file.name, None)
            self._failed.pop(source.file.name, None)
            if source.in_failed_dir:
                log.warning("buffer file failed/%s replayed after all", source.file.name)
            else:
                log.info("buffer file %s replayed", source.file.name)

    def _keep_torn_tail(self, f: BufFile, torn: TornTail) -> None:
        self.torn_tails += 1
        target = self.torn_dir / f"{f.name}.at{torn.offset}"
        try:
            self.torn_dir.mkdir(parents=True, exist_ok=True)
            with f.path.open("rb") as src:
                src.seek(torn.offset)
                data = src.read()
            target.write_bytes(data)
        except OSError as exc:
            log.error("could not keep the torn tail of %s: %s", f.name, exc)
        log.warning(
            "buffer file %s: unreadable tail skipped (%s; %d bytes at offset %d, kept in "
            "torn/%s); every complete record before it was replayed. A torn last record is "
            "a write its process died in (that push was never acknowledged); anything "
            "longer is corruption to inspect",
            f.name,
            torn.reason,
            torn.size,
            torn.offset,
            target.name,
        )

    def _retry_failed(self) -> None:
        """Replay the set-aside files whose retry time has come (each on its own)."""
        try:
            entries = sorted(os.scandir(self.failed_dir), key=lambda e: e.name)
        except FileNotFoundError:
            return
        now = time.monotonic()
        for entry in entries:
            if self._paused():
                return
            f = BufFile.parse(Path(entry.path), self.tag)
            if f is None:
                continue
            info = self._failed.get(f.name)
            if info is not None and info.next_try > now:
                continue
            if info is None:  # found at startup (or set aside by another process)
                self._failed[f.name] = FailedInfo("", 0, 0.0)
            self._replay_single(f)

    def _replay_single(self, f: BufFile) -> None:
        try:
            reader = RecordReader(f.path)
        except FileNotFoundError:
            return
        source = _Source(f, reader, in_failed_dir=True)
        try:
            batch: list[tuple[int, Record]] = []
            while not source.failed and not self._paused():
                record = reader.next()
                if record is None:
                    source.exhausted = True
                    break
                batch.append((0, record))
                source.inflight += 1
                if len(batch) >= self.max_batch:
                    self._flush(batch, [source])
                    batch = []
            if batch and not source.failed and not self._paused():
                self._flush(batch, [source])
            self._finish_done([source])
        finally:
            reader.close()

    # -- status -------------------------------------------------------------------------------
    def _count(self, path: Path) -> int:
        try:
            st = path.stat()
        except FileNotFoundError:
            return 0
        cached = self._count_cache.get(str(path))
        if cached is not None and cached[:2] == (st.st_size, st.st_mtime_ns):
            return cached[2]
        count = count_records(path)
        self._count_cache[str(path)] = (st.st_size, st.st_mtime_ns, count)
        return count

    def status(self) -> dict[str, Any]:
        """Counts of buffered events not yet replayed, from the files of this host."""
        files: list[dict[str, Any]] = []
        pending = failed = foreign = 0
        seen: set[str] = set()
        for folder, state in ((self.directory, None), (self.failed_dir, "failed")):
            try:
                names = sorted(os.listdir(folder))
            except FileNotFoundError:
                continue
            for name in names:
                path = folder / name
                f = BufFile.parse(path, self.tag)
                if f is None:
                    if NAME_RE.match(name):
                        foreign += 1
                    continue
                seen.add(str(path))
                events = self._count(path)
                if state == "failed":
                    failed += events
                    kind = "failed"
                else:
                    done = self._progress.get(name, (0, 0))[1] if self.lock.held else 0
                    events = max(0, events - done)
                    pending += events
                    kind = "active" if f.active else "ready"
                entry: dict[str, Any] = {"name": name, "state": kind, "events": events}
                info = self._failed.get(name)
                if kind == "failed" and info is not None and info.error:
                    entry["error"] = info.error
                    entry["attempts"] = info.attempts
                files.append(entry)
        self._count_cache = {k: v for k, v in self._count_cache.items() if k in seen}
        prefix = f"failover-{self.tag}-"
        try:
            torn = sum(1 for n in os.listdir(self.torn_dir) if n.startswith(prefix))
        except FileNotFoundError:
            torn = 0
        counts = {state: 0 for state in ("active", "ready", "failed")}
        for entry in files:
            counts[entry["state"]] += 1
        return {
            "pending": pending,
            "failed": failed,
            "dbHealthy": self.db_healthy,
            "worker": self.writer.pid,
            "files": files[:MAX_LISTED_FILES],
            "fileCounts": counts,
            "replayer": self.lock.held,
            "replayerPid": self.lock.holder_pid(),
            "maintenanceMode": self.maintenance.push_on,
            "popMaintenanceMode": self.maintenance.pop_on,
            "tornRecords": torn,
            "foreignFiles": foreign,
            "directory": str(self.directory),
            "writable": self.writable,
            "bufferedByWorker": self.buffered,
            "replayedByWorker": self.replayed,
            "lastError": self.last_error,
        }


def _item(event: dict[str, Any]) -> dict[str, Any]:
    """A buffered event as a store.push item (transactionId makes replays idempotent)."""
    return {
        "queue": event["queue"],
        "partition": event.get("partition") or "Default",
        "payload": event.get("payload"),
        "transactionId": event["transactionId"],
        "traceId": event.get("traceId"),
        "producerSub": event.get("producerSub"),
    }
