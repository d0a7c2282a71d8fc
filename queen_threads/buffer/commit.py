"""Committing replayed events and settling their files.

The push is idempotent by transactionId (a `duplicate` answer counts as success), so
replaying an event twice stores it once. A file is deleted only after all its events are
committed.

- a queue at its `maxSize` (`reason: queue_full`) is back-pressure, not a rejection: the
  events of that queue that fit are pushed one at a time, in order; the queue is then
  held for QUEUE_FULL_HOLD_S, and the file that met the full queue stops there (its
  progress kept, still in the main folder), as does every file reaching an event of a
  held queue, so the queue's events keep their order across files. Nothing is dropped.
- `failed/`: files whose events the database rejected for another reason (e.g. a payload
  PostgreSQL refuses); retried with a growing delay, never dropped.
- `torn/`: the bytes of a torn last record (a write the process died in), kept for
  inspection; its request was never acknowledged, so nothing acknowledged is in there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queen_threads.buffer.files import BufFile
from queen_threads.buffer.records import Record, RecordReader, TornTail, copy_tail, to_item
from queen_threads.errors import DatabaseUnavailable
from queen_threads.queue.capacity import refused_for_size
from queen_threads.queue.store import QueueStore

log = logging.getLogger("queen_threads.file_buffer")

OK_STATUSES = ("queued", "duplicate")
FAILED_RETRY_S = 5.0  # first retry of a failed file; doubles per attempt
FAILED_RETRY_MAX_S = 300.0
QUEUE_FULL_HOLD_S = 1.0  # how long a full queue gets no replayed event

Pairs = list[tuple[str, str]]
Batch = list[tuple[int, Record]]  # (index of its source, record)


class DatabaseDown(Exception):
    """Replay stops: PostgreSQL is unreachable again."""


@dataclass
class Source:
    """A file being replayed."""

    file: BufFile
    reader: RecordReader
    in_failed_dir: bool
    inflight: int = 0  # records taken from the file and not yet committed
    exhausted: bool = False
    failed: bool = False
    done: bool = False
    held_at: int | None = None  # index of the record a full queue held back (this pass)

    @property
    def held(self) -> bool:
        return self.held_at is not None

    def hold(self, index: int) -> None:
        """Stop reading this file at record `index` for this pass (earlier ones may still
        be committed; the next pass resumes from there)."""
        if self.held_at is None or index < self.held_at:
            self.held_at = index


@dataclass
class FailedInfo:
    error: str
    attempts: int = 0
    next_try: float = 0.0


class Committer:
    """Pushes batches of buffered events and settles their files: how far each file is
    committed, setting a rejected file aside in failed/, deleting a finished one."""

    def __init__(
        self,
        store: QueueStore,
        failed_dir: Path,
        torn_dir: Path,
        set_healthy: Callable[[bool, str | None], None],
        on_replayed: Callable[[Pairs], None] | None = None,
    ) -> None:
        self.store = store
        self.failed_dir = failed_dir
        self.torn_dir = torn_dir
        self.set_healthy = set_healthy
        self.on_replayed = on_replayed
        self.replayed = 0  # events this process replayed (queued + duplicate)
        self.duplicates = 0
        self.torn_tails = 0
        self.progress: dict[str, tuple[int, int]] = {}  # file name -> (offset, index)
        self.failed: dict[str, FailedInfo] = {}
        self.full: dict[str, tuple[float, str]] = {}  # queue -> (held until, its error)

    def prune(self, names: set[str]) -> None:
        """Forget the progress of every file but these (the others are gone)."""
        self.progress = {k: v for k, v in self.progress.items() if k in names}

    def is_held(self, queue: str) -> bool:
        """Is this queue full, its replayed events held back for a moment?"""
        entry = self.full.get(queue)
        if entry is None:
            return False
        if entry[0] > time.monotonic():
            return True
        del self.full[queue]
        return False

    def held_queues(self) -> dict[str, str]:
        """Queues whose replayed events are held back right now, with their error."""
        return {
            queue: error for queue, (_, error) in list(self.full.items()) if self.is_held(queue)
        }

    def commit(self, batch: Batch, sources: list[Source]) -> int:
        """Push one batch; returns the number of events committed."""
        items = [to_item(record.event) for _, record in batch]
        try:
            results = self.store.push(items)
            if len(results) != len(items):
                raise RuntimeError(f"push answered {len(results)} results for {len(items)}")
        except DatabaseUnavailable as exc:
            self.set_healthy(False, str(exc))
            raise DatabaseDown from exc
        except Exception as exc:
            # The whole call was rolled back: find the culprits one event at a time.
            log.warning("replay batch rejected (%s); retrying its events one by one", exc)
            return self._flush_one_by_one(batch, sources)
        self.set_healthy(True, None)
        committed = self._settle(batch, self._fill(batch, results), sources)
        self.finish_done(sources)
        return committed

    def _push_one(self, record: Record) -> dict[str, Any]:
        """One event alone; a rejected call comes back as a failed result."""
        try:
            return self.store.push([to_item(record.event)])[0]
        except DatabaseUnavailable as exc:
            self.set_healthy(False, str(exc))
            raise DatabaseDown from exc
        except Exception as exc:
            return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}

    def _fill(self, batch: Batch, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A full queue refuses every event of it in one call, even when some would fit
        (and a batch larger than its maxSize never would): push them one at a time, in
        order, until the queue refuses one alone."""
        full: set[str] = set()
        filled = list(results)
        for i, ((_, record), result) in enumerate(zip(batch, results, strict=True)):
            queue = record.event["queue"]
            if not refused_for_size(result) or queue in full:
                continue
            filled[i] = self._push_one(record)
            if refused_for_size(filled[i]):
                full.add(queue)
        return filled

    def _flush_one_by_one(self, batch: Batch, sources: list[Source]) -> int:
        committed = 0
        for si, record in batch:
            if sources[si].failed or sources[si].held:
                continue
            committed += self._settle([(si, record)], [self._push_one(record)], sources)
        self.finish_done(sources)
        return committed

    def _settle(self, batch: Batch, results: list[dict[str, Any]], sources: list[Source]) -> int:
        committed = 0
        woken: Pairs = []
        for (si, record), result in zip(batch, results, strict=True):
            source = sources[si]
            status = result.get("status")
            if refused_for_size(result):
                self.hold_queue(record.event["queue"], str(result.get("error")))
                source.hold(record.index)
                continue
            if status not in OK_STATUSES:
                self._fail(source, str(result.get("error") or f"status {status}"))
                continue
            committed += 1
            source.inflight -= 1
            if not source.failed and (source.held_at is None or record.index < source.held_at):
                self.progress[source.file.name] = (record.end, record.index + 1)
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

    def hold_queue(self, queue: str, error: str) -> None:
        """The queue refused for size: hold its events back for QUEUE_FULL_HOLD_S."""
        if queue not in self.full:
            log.warning("replay waits for queue %s to make room: %s", queue, error)
        self.full[queue] = (time.monotonic() + QUEUE_FULL_HOLD_S, error)

    def postpone(self, name: str) -> None:
        """The next retry of the failed/ file `name`: FAILED_RETRY_S doubled per attempt."""
        info = self.failed.get(name)
        if info is not None:
            delay = FAILED_RETRY_S * 2 ** max(info.attempts - 1, 0)
            info.next_try = time.monotonic() + min(delay, FAILED_RETRY_MAX_S)

    def _fail(self, source: Source, error: str) -> None:
        """The database refused an event of this file: set the whole file aside."""
        if source.failed:
            return
        source.failed = True
        self.progress.pop(source.file.name, None)
        info = self.failed.setdefault(source.file.name, FailedInfo(error))
        info.error = error
        info.attempts += 1
        self.postpone(source.file.name)
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

    def finish_done(self, sources: Iterable[Source]) -> None:
        """Delete the files whose every event is committed (keeping a torn tail aside)."""
        for source in sources:
            if source.done or source.failed or source.held or not source.exhausted:
                continue
            if source.inflight:  # taken from the file, not committed yet
                continue
            source.done = True
            torn = source.reader.torn
            if torn is not None and torn.size > 0:
                self._keep_torn_tail(source.file, torn)
            with contextlib.suppress(FileNotFoundError):
                source.file.path.unlink()
            self.progress.pop(source.file.name, None)
            self.failed.pop(source.file.name, None)
            if source.in_failed_dir:
                log.warning("buffer file failed/%s replayed after all", source.file.name)
            else:
                log.info("buffer file %s replayed", source.file.name)

    def _keep_torn_tail(self, f: BufFile, torn: TornTail) -> None:
        self.torn_tails += 1
        target = self.torn_dir / f"{f.name}.at{torn.offset}"
        try:
            self.torn_dir.mkdir(parents=True, exist_ok=True)
            copy_tail(f.path, torn, target)
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
