"""The failover file buffer against real PostgreSQL: record format, torn tails, order,
idempotent replay, the failed/ folder, the one-replayer lock, and files of dead processes.

The replay is driven by hand (`drain()` calls `replay_once()`), no background thread."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg2.extensions
import pytest

from queen_threads.background.maintenance import Maintenance
from queen_threads.buffer import (
    BufferWriter,
    FileBuffer,
    RecordReader,
    database_tag,
    encode_record,
)
from queen_threads.buffer import replay as replay_mod
from queen_threads.db import Database, PoolConfig
from queen_threads.queue.store import QueueStore
from queen_threads.settings import load_settings
from tests.support.sql import sql_rows

Make = Callable[..., FileBuffer]


@pytest.fixture
def store(database: Database) -> QueueStore:
    return QueueStore(database)


@pytest.fixture
def make_buffer(
    tmp_path: Path, migrated_dsn: str, store: QueueStore, database: Database
) -> Iterator[Make]:
    made: list[FileBuffer] = []

    def make(dsn: str | None = None, st: QueueStore | None = None, **env: str) -> FileBuffer:
        settings = load_settings(
            {"FILE_BUFFER_DIR": str(tmp_path / "buf"), "FILE_BUFFER_MAX_BATCH": "4", **env},
            dotenv_path=None,
        )
        fb = FileBuffer(settings, dsn or migrated_dsn, st or store, Maintenance(database))
        made.append(fb)
        return fb

    yield make
    for fb in made:
        fb.stop()


def items(*specs: tuple[str, int], queue: str = "fb") -> list[dict[str, Any]]:
    """Push items (partition, n): payload {"n": n}, transactionId t<n>."""
    return [
        {"queue": queue, "partition": p, "payload": {"n": n}, "transactionId": f"t{n}"}
        for p, n in specs
    ]


def drain(fb: FileBuffer, timeout: float = 10) -> dict[str, Any]:
    """Replay until nothing is pending (the test holds no other replayer)."""
    assert fb.lock.try_acquire()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        moved = fb.replay_once()
        status = fb.status()
        if not moved and status["pending"] == 0:
            return status
    raise AssertionError(f"buffer not drained: {fb.status()}")


def stored(database: Database, queue: str = "fb") -> list[tuple[str, int]]:
    """(partition, n) of the queue's messages in delivery order ((created_at, id))."""
    rows = sql_rows(
        database,
        """SELECT p.name, (m.payload ->> 'n')::int
             FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
             JOIN queen.queues q ON q.id = p.queue_id
            WHERE q.name = %s ORDER BY m.id""",
        (queue,),
    )
    return [(r[0], r[1]) for r in rows]


def buffer_files(fb: FileBuffer, folder: str = "") -> list[Path]:
    d = fb.directory / folder if folder else fb.directory
    return sorted(p for p in d.iterdir() if p.name.startswith("failover-"))


def test_buffered_answer_and_record_format(make_buffer: Make) -> None:
    fb = make_buffer()
    out = fb.buffer(items(("A", 1), ("B", 2)), "test")
    assert out == [
        {"index": 0, "status": "buffered", "queue": "fb", "partition": "A",
         "transactionId": "t1", "transaction_id": "t1"},
        {"index": 1, "status": "buffered", "queue": "fb", "partition": "B",
         "transactionId": "t2", "transaction_id": "t2"},
    ]  # fmt: skip
    (active,) = buffer_files(fb)
    assert active.name.endswith(".buf.tmp") and f"-{os.getpid()}-" in active.name
    reader = RecordReader(active)
    first, second = reader.next(), reader.next()
    assert reader.next() is None and reader.torn is None
    reader.close()
    assert first is not None and second is not None
    assert first.event["payload"] == {"n": 1} and first.event["transactionId"] == "t1"
    assert second.event["ts"] > first.event["ts"]
    assert second.end == active.stat().st_size
    fb.writer.close()
    (closed,) = buffer_files(fb)
    assert closed.name == active.name.removesuffix(".tmp")
    assert fb.status()["pending"] == 2


def test_database_tag_ignores_port_and_credentials() -> None:
    a = database_tag("postgresql://u:secret@127.0.0.1:5432/db1?sslmode=disable")
    assert a == database_tag("postgresql://other@127.0.0.1:7777/db1")
    assert a == database_tag("host=127.0.0.1 port=1 dbname=db1 user=x")
    assert a != database_tag("postgresql://u@127.0.0.1:5432/db2")


@pytest.mark.parametrize("damage", ["half-header", "half-body", "bad-checksum", "zeros"])
def test_torn_last_record_is_skipped_and_reported_and_the_rest_replayed(
    make_buffer: Make, database: Database, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    fb = make_buffer()
    fb.buffer(items(*[("P", n) for n in range(1, 7)]), "test")
    fb.writer.close()
    (path,) = buffer_files(fb)
    record = encode_record({"ts": 1, **items(("P", 99))[0]})
    tail = {
        "half-header": record[:5],
        "half-body": record[: len(record) // 2],
        "bad-checksum": record[:8] + b"\0\0\0\0" + record[12:],
        "zeros": b"\0" * 64,
    }[damage]
    with path.open("ab") as f:
        f.write(tail)
    caplog.set_level(logging.WARNING, logger="queen_threads.file_buffer")
    status = drain(fb)
    assert stored(database) == [("P", n) for n in range(1, 7)]
    assert buffer_files(fb) == []
    assert status["tornRecords"] == 1 and status["failed"] == 0
    (kept,) = list((fb.directory / "torn").iterdir())
    assert kept.read_bytes() == tail
    assert any("unreadable tail skipped" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("open_files", [64, 2])
def test_order_is_kept_across_processes_and_rotated_files(
    make_buffer: Make, database: Database, monkeypatch: pytest.MonkeyPatch, open_files: int
) -> None:
    monkeypatch.setattr(replay_mod, "MAX_OPEN_FILES", open_files)  # 2: merge a sliding window
    fb = make_buffer(FILE_BUFFER_EVENTS_PER_FILE="3")
    # Two "processes" (each its own writer and pid) alternate, files rotate every 3 events.
    writers = [BufferWriter(fb.directory, fb.tag, 3) for _ in range(2)]
    writers[1].pid = writers[0].pid + 100000
    expected = []
    for n in range(60):
        partition = f"p{n % 3}"
        event = items((partition, n))[0] | {"traceId": None, "producerSub": None}
        writers[(n // 2) % 2].append([event])
        expected.append((partition, n))
    for w in writers:
        w.close()
    assert len(buffer_files(fb)) >= 20
    drain(fb)
    assert stored(database) == expected  # global order, so per partition too


def test_a_file_still_being_written_holds_back_newer_events(
    make_buffer: Make, database: Database
) -> None:
    fb = make_buffer()
    live = BufferWriter(fb.directory, fb.tag, 100)  # holds its flock like a live process
    other = BufferWriter(fb.directory, fb.tag, 100)
    other.pid += 100000
    live.append(items(("P", 1)))
    other.append(items(("P", 2)))
    other.close()
    assert fb.lock.try_acquire()
    fb.replay_once()
    assert stored(database) == []  # event 2 must not overtake event 1
    live.close()
    drain(fb)
    assert stored(database) == [("P", 1), ("P", 2)]


def test_replaying_twice_inserts_once(
    make_buffer: Make, database: Database, tmp_path: Path
) -> None:
    fb = make_buffer()
    fb.buffer(items(*[("P", n) for n in range(20)]), "test")
    fb.writer.close()
    (path,) = buffer_files(fb)
    copy = tmp_path / "copy"
    shutil.copy(path, copy)
    drain(fb)
    assert len(stored(database)) == 20
    shutil.copy(copy, path)  # e.g. a replayer killed after committing, before deleting
    drain(fb)
    assert stored(database) == [("P", n) for n in range(20)]
    assert fb.committer.duplicates == 20


def test_a_rejected_file_goes_to_failed_and_is_retried_not_dropped(
    make_buffer: Make, database: Database
) -> None:
    fb = make_buffer()
    bad = items(("P", 1), ("P", 2), ("P", 3))
    bad[1]["payload"] = {"n": 2, "text": "nul \u0000 byte"}  # PostgreSQL's jsonb refuses it
    fb.buffer(bad, "test")
    fb.writer.close()
    assert fb.lock.try_acquire()
    fb.replay_once()
    assert buffer_files(fb) == []
    (failed,) = buffer_files(fb, "failed")
    status = fb.status()
    assert status["failed"] == 3 and status["pending"] == 0
    assert "unsupported Unicode escape" in status["files"][0]["error"]
    assert status["files"][0]["attempts"] == 1
    assert stored(database) == [("P", 1)]  # the events before the culprit went in
    fb.replay_once()  # not due yet: stays in failed/
    assert fb.status()["files"][0]["attempts"] == 1
    fb.committer.failed[failed.name].next_try = 0.0
    fb.replay_once()  # retried, refused again, kept: never dropped
    assert failed.exists() and fb.status()["files"][0]["attempts"] == 2
    assert stored(database) == [("P", 1)]


def consume_all(store: QueueStore, queue: str) -> int:
    """Pop (auto-acknowledged) everything queue mode can see: room for a capped queue."""
    request = {"idx": 0, "queue": queue, "batch": 100, "autoAck": True, "leaseId": str(uuid4())}
    return len(store.pop([request])[0]["messages"])


def test_a_full_queue_holds_its_events_back_in_order_and_drops_none(
    make_buffer: Make, database: Database, store: QueueStore
) -> None:
    """Batches of 4 into a queue of maxSize 3: what fits goes in one by one, in order; the
    file stays in the main folder (not failed/) and so do later files reaching that queue."""
    store.configure({"queue": "capped", "options": {"maxSize": 3}})
    fb = make_buffer()
    fb.buffer(items(*[("P", n) for n in range(6)], queue="capped") + items(("P", 100)), "test")
    fb.writer.close()
    fb.buffer(items(("P", 6), queue="capped") + items(("P", 101)), "test")
    fb.writer.close()
    assert fb.lock.try_acquire()

    def released() -> None:  # the hold expires (QUEUE_FULL_HOLD_S later)
        fb.committer.full = {q: (0.0, e) for q, (_, e) in fb.committer.full.items()}

    fb.replay_once()
    assert stored(database, "capped") == [("P", 0), ("P", 1), ("P", 2)]
    assert stored(database) == []  # later events of the stopped files wait with them
    assert len(buffer_files(fb)) == 2 and not (fb.directory / "failed").exists()
    status = fb.status()
    assert list(status["queuesFull"]) == ["capped"] and status["failed"] == 0
    assert status["pending"] == 6
    fb.replay_once()  # held: nothing tried, nothing lost
    assert len(stored(database, "capped")) == 3 and fb.status()["pending"] == 6

    assert consume_all(store, "capped") == 3
    released()
    fb.replay_once()
    assert stored(database, "capped") == [("P", n) for n in range(6)]
    assert stored(database) == [("P", 100), ("P", 101)]
    assert fb.status()["pending"] == 2  # capped 6 (full again) and fb 101 (committed, its
    #                                     file stopped before it: replayed as a duplicate)
    assert consume_all(store, "capped") == 3
    released()
    status = drain(fb)
    assert stored(database, "capped") == [("P", n) for n in range(7)]
    assert stored(database) == [("P", 100), ("P", 101)]
    assert buffer_files(fb) == [] and not (fb.directory / "failed").exists()
    assert status["queuesFull"] == {} and fb.committer.duplicates == 1


def test_push_buffers_while_the_database_is_unreachable_and_files_wait(
    make_buffer: Make, database: Database, migrated_dsn: str
) -> None:
    dead_dsn = psycopg2.extensions.make_dsn(migrated_dsn, port=1, connect_timeout=1)
    dead_db = Database(PoolConfig(dsn=dead_dsn, max_size=2, acquire_timeout_s=1))
    dead_store = QueueStore(dead_db)
    down = make_buffer(dead_dsn, dead_store)
    assert down.tag == make_buffer().tag  # same database, other port
    out = down.push(items(("P", 1), ("P", 2)), dead_store.push)
    assert [r["status"] for r in out] == ["buffered", "buffered"]
    assert down.db_healthy is False
    down.writer.close()
    assert down.lock.try_acquire()
    assert down.replay_once() is False
    assert len(buffer_files(down)) == 1  # kept while the database is down
    down.stop()
    dead_db.close()
    up = make_buffer()
    status = drain(up)
    assert stored(database) == [("P", 1), ("P", 2)]
    assert status["dbHealthy"] is True


def test_only_one_replayer_per_folder_and_database(make_buffer: Make) -> None:
    first, second = make_buffer(), make_buffer()
    assert first.lock.try_acquire()
    assert not second.lock.try_acquire()
    assert second.status()["replayerPid"] == os.getpid()
    assert second.tick() is False  # not the replayer: nothing replayed
    first.stop()  # (a dead process releases its flock the same way)
    assert second.lock.try_acquire()


def test_file_left_open_by_a_dead_process_is_closed_and_replayed(
    make_buffer: Make, database: Database
) -> None:
    fb = make_buffer()
    dead = BufferWriter(fb.directory, fb.tag, 100)
    dead.pid += 100000
    dead.append(items(("P", 1), ("P", 2)))
    assert dead._fd is not None
    os.close(dead._fd)  # the process died: its lock is gone, the file is still `.tmp`
    dead._fd = None
    (path,) = buffer_files(fb)
    assert path.name.endswith(".buf.tmp")
    status = fb.status()
    assert status["pending"] == 2 and status["files"][0]["state"] == "active"
    drain(fb)
    assert stored(database) == [("P", 1), ("P", 2)]
    assert buffer_files(fb) == []


def test_replay_wakes_local_consumers(make_buffer: Make, database: Database) -> None:
    woken: list[list[tuple[str, str]]] = []
    fb = make_buffer()
    fb.committer.on_replayed = woken.append
    fb.buffer(items(("A", 1), ("B", 2), ("A", 3)), "test")
    fb.writer.close()
    drain(fb)
    assert woken == [[("fb", "A"), ("fb", "B")]]


def test_a_deleted_open_file_is_replaced_not_written_into_the_void(make_buffer: Make) -> None:
    fb = make_buffer()
    fb.buffer(items(("P", 1)), "test")
    (first,) = buffer_files(fb)
    first.unlink()  # an operator cleaning up the folder under a running server
    fb.buffer(items(("P", 2)), "test")
    (second,) = buffer_files(fb)
    assert second != first
    reader = RecordReader(second)
    record = reader.next()
    reader.close()
    assert record is not None and record.event["transactionId"] == "t2"
