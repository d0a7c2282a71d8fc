"""The failover buffer as the runtime sees it: pushes go through the database, into the
buffer files when it is unreachable (or maintenance mode is on), and a background thread
(a greenlet under gevent) in every worker process closes idle files, watches the
database's health and, in the process holding the host lock, replays."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from queen_threads.background.maintenance import Maintenance
from queen_threads.buffer.commit import Committer, Pairs
from queen_threads.buffer.files import NAME_RE, BufFile, database_tag, holds_files, name_prefix
from queen_threads.buffer.lock import HostLock
from queen_threads.buffer.records import count_records, to_event
from queen_threads.buffer.replay import Replayer
from queen_threads.buffer.writer import BufferWriter
from queen_threads.errors import DatabaseError, DatabaseUnavailable, Unavailable
from queen_threads.queue.store import QueueStore
from queen_threads.settings import Settings

log = logging.getLogger("queen_threads.file_buffer")

DEFAULT_DIR = ".queen-data/buffers"
MAX_LISTED_FILES = 100  # files named in the status (the counts cover all)
PROBE_S = 1.0  # while unhealthy, how often a non-replaying process pings the database
SCAN_EVERY_S = 1.0  # how often an idle process lists the buffer folders for files

PushFn = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


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
        self.maintenance = maintenance
        self.ready = ready
        self.ping = ping
        self.flush_s = settings.file_buffer_flush_ms / 1000
        self.writer = BufferWriter(self.directory, self.tag, settings.file_buffer_events_per_file)
        self.lock = HostLock(self.directory / f"replay-{self.tag}.lock")
        self.committer = Committer(
            store, self.failed_dir, self.torn_dir, self._set_healthy, on_replayed
        )
        self.replayer = Replayer(
            self.directory, self.tag, self.committer, settings.file_buffer_max_batch, self._paused
        )
        self.db_healthy = True
        self.last_error: str | None = None
        self.writable = True
        self.buffered = 0  # events this process buffered
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
            for d in (self.directory, self.failed_dir, self.torn_dir):
                d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.error("failover buffer folder %s is not usable: %s", self.directory, exc)
        while not self._stop.is_set():
            busy = False
            try:
                busy = self.tick()
            except Exception:
                log.exception("failover buffer background pass failed")
            self._stop.wait(0.001 if busy else self.flush_s)

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
        return holds_files((self.directory, self.failed_dir), self.tag)

    # -- push path ---------------------------------------------------------------------------
    def push(self, items: list[dict[str, Any]], direct: PushFn) -> list[dict[str, Any]]:
        """Push through `direct` (the database); buffer when it is unreachable, when its
        schema is not applied yet, or when maintenance mode is on. `direct` leaves the items
        as they are (the store encrypts copies), so that a buffered item is the one sent."""
        if self.maintenance.push_on:
            return self.buffer(items, "maintenance mode is on")
        try:
            results = direct(items)
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
        events = [to_event(item) for item in items]
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
        if self._paused() or not self.ready():
            return False
        return self.replayer.replay_once()

    def _paused(self) -> bool:
        return self._stop.is_set() or self.maintenance.push_on

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
                    done = self.committer.progress.get(name, (0, 0))[1] if self.lock.held else 0
                    events = max(0, events - done)
                    pending += events
                    kind = "active" if f.active else "ready"
                entry: dict[str, Any] = {"name": name, "state": kind, "events": events}
                info = self.committer.failed.get(name)
                if kind == "failed" and info is not None and info.error:
                    entry["error"] = info.error
                    entry["attempts"] = info.attempts
                files.append(entry)
        self._count_cache = {k: v for k, v in self._count_cache.items() if k in seen}
        prefix = name_prefix(self.tag)
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
            "replayedByWorker": self.committer.replayed,
            "lastError": self.last_error,
            "queuesFull": self.committer.held_queues(),
        }
