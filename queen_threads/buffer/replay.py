"""Replaying the buffer files into PostgreSQL, in push order.

The replayer merges the closed files by event timestamp (each process's timestamps are
strictly increasing), never passing an event that is newer than the first event of a file
still being written, and pushes FILE_BUFFER_MAX_BATCH events per `store.push` call. Files
set aside in failed/ are replayed on their own once their retry time has come. A file that
reaches an event of a queue held for being full (commit.py) stops there for this pass.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from queen_threads.buffer.commit import Batch, Committer, DatabaseDown, FailedInfo, Source
from queen_threads.buffer.files import BufFile, scan
from queen_threads.buffer.records import Record, RecordReader

MAX_OPEN_FILES = 64  # files merged at once; later ones wait (their first event bounds us)
SLICE_S = 1.0  # longest replay pass before the loop looks at stop/maintenance again


class Replayer:
    """Replays the buffer files of one database; only the holder of the host lock runs it."""

    def __init__(
        self,
        directory: Path,
        tag: str,
        committer: Committer,
        max_batch: int,
        paused: Callable[[], bool],
    ) -> None:
        self.directory = directory
        self.tag = tag
        self.committer = committer
        self.max_batch = max_batch
        self.paused = paused

    def replay_once(self) -> bool:
        """One bounded pass; True when it committed events and more may be waiting."""
        try:
            moved = self._replay_main()
            self._retry_failed()
        except DatabaseDown:
            return False
        return moved

    def _replay_main(self) -> bool:
        ready, active = scan(self.directory, self.tag)
        known = {f.name for f in ready}
        self.committer.prune(known)
        if not ready:
            return False
        window, later = ready[:MAX_OPEN_FILES], ready[MAX_OPEN_FILES:]
        # No event of a file outside the window (or still being written) may be passed:
        # each of their events sorts after (first event time, file) of that file.
        bounds = [(f.ns, f.key, -1) for f in (*later, *active)]
        horizon = min(bounds) if bounds else None
        sources: list[Source] = []
        heap: list[tuple[tuple[int, tuple[int, int, int], int], int, Record]] = []
        committed = 0
        try:
            for f in window:
                offset, index = self.committer.progress.get(f.name, (0, 0))
                try:
                    reader = RecordReader(f.path, offset, index)
                except FileNotFoundError:
                    continue
                source = Source(f, reader, in_failed_dir=False)
                sources.append(source)
                self._advance(len(sources) - 1, source, heap)
            self.committer.finish_done(sources)
            deadline = time.monotonic() + SLICE_S
            batch: Batch = []
            while heap and not self.paused():
                key, si, record = heap[0]
                if horizon is not None and key >= horizon:
                    break
                heapq.heappop(heap)
                source = sources[si]
                if not self._takes(source, record):
                    continue
                batch.append((si, record))
                source.inflight += 1
                self._advance(si, source, heap)
                if len(batch) >= self.max_batch:
                    committed += self.committer.commit(batch, sources)
                    batch = []
                    if time.monotonic() > deadline:
                        break
            if batch and not self.paused():
                committed += self.committer.commit(batch, sources)
        finally:
            for source in sources:
                source.reader.close()
        return committed > 0

    def _takes(self, source: Source, record: Record) -> bool:
        """Should this record go into the batch? Not after its file failed or stopped, nor
        while its queue is held for being full (its file stops at it)."""
        if source.failed or source.held:
            return False
        if self.committer.is_held(record.event["queue"]):
            source.hold(record.index)
            return False
        return True

    def _advance(self, si: int, source: Source, heap: list[Any]) -> None:
        record = source.reader.next()
        if record is None:
            source.exhausted = True
            return
        ts = record.event.get("ts")
        key = (ts if isinstance(ts, int) else source.file.ns, source.file.key, record.index)
        heapq.heappush(heap, (key, si, record))

    def _retry_failed(self) -> None:
        """Replay the set-aside files whose retry time has come (each on its own)."""
        try:
            entries = sorted(os.scandir(self.committer.failed_dir), key=lambda e: e.name)
        except FileNotFoundError:
            return
        now = time.monotonic()
        failed = self.committer.failed
        for entry in entries:
            if self.paused():
                return
            f = BufFile.parse(Path(entry.path), self.tag)
            if f is None:
                continue
            info = failed.get(f.name)
            if info is not None and info.next_try > now:
                continue
            if info is None:  # found at startup (or set aside by another process)
                failed[f.name] = FailedInfo("", 0, 0.0)
            self._replay_single(f)

    def _replay_single(self, f: BufFile) -> None:
        try:
            reader = RecordReader(f.path)
        except FileNotFoundError:
            return
        source = Source(f, reader, in_failed_dir=True)
        try:
            batch: Batch = []
            while not source.failed and not source.held and not self.paused():
                record = reader.next()
                if record is None:
                    source.exhausted = True
                    break
                if not self._takes(source, record):
                    break
                batch.append((0, record))
                source.inflight += 1
                if len(batch) >= self.max_batch:
                    self.committer.commit(batch, [source])
                    batch = []
            if batch and not source.failed and not self.paused():
                self.committer.commit(batch, [source])
            if source.held:  # a full queue: not a new failure, but not at once again either
                self.committer.postpone(f.name)
            self.committer.finish_done([source])
        finally:
            reader.close()
