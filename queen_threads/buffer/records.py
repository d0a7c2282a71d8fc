"""The record format of a buffer file, and reading it back up to a torn tail.

A record is a 12-byte header (`QBF1`, u32 length, u32 CRC-32 of the body, little endian)
then the JSON body `{ts, queue, partition, payload, transactionId, traceId, producerSub}`
(and `traceContext` when the item has one, docs/observability.md).
A record that is incomplete, fails its checksum or is not valid JSON ends the readable
part of a file: it and everything after it is the torn tail.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

MAGIC = b"QBF1"
HEADER = struct.Struct("<4sII")
MAX_RECORD = 1 << 30


def encode_record(event: dict[str, Any]) -> bytes:
    body = orjson.dumps(event)
    return HEADER.pack(MAGIC, len(body), zlib.crc32(body)) + body


def to_event(item: dict[str, Any]) -> dict[str, Any]:
    """The body of a record (without its `ts`) for a push item."""
    return {
        "queue": item["queue"],
        "partition": item["partition"],
        "payload": item.get("payload"),
        "transactionId": item["transactionId"],
        "traceId": item.get("traceId"),
        "producerSub": item.get("producerSub"),
        **_trace_context(item),
    }


def _trace_context(record: dict[str, Any]) -> dict[str, Any]:
    context = record.get("traceContext")
    return {"traceContext": context} if context else {}


def to_item(event: dict[str, Any]) -> dict[str, Any]:
    """A buffered event as a store.push item (transactionId makes replays idempotent)."""
    return {
        "queue": event["queue"],
        "partition": event.get("partition") or "Default",
        "payload": event.get("payload"),
        "transactionId": event["transactionId"],
        "traceId": event.get("traceId"),
        "producerSub": event.get("producerSub"),
        **_trace_context(event),
    }


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


def copy_tail(path: Path, torn: TornTail, target: Path) -> None:
    """Keep the bytes of a torn tail aside for inspection; raises OSError."""
    with path.open("rb") as src:
        src.seek(torn.offset)
        data = src.read()
    target.write_bytes(data)
