"""Failover file buffer: pushes that cannot reach PostgreSQL are kept in local files and
replayed, in push order, once the database answers again. Nothing acknowledged is lost,
even when the server is killed meanwhile.

One module per concern: `records` (the CRC-framed record format, torn tails), `files`
(names, order, files dead processes left), `writer` (append + fsync, rotation), `lock`
(one replayer per host and database), `replay` (merging files in order, failed/
retries), `commit` (pushing batches, settling files: failed/, torn/, deletion), `buffer`
(the `FileBuffer` the runtime uses: push fallback and status).
"""

from queen_threads.buffer.buffer import FileBuffer
from queen_threads.buffer.commit import Committer
from queen_threads.buffer.files import BufFile, database_tag
from queen_threads.buffer.lock import HostLock
from queen_threads.buffer.records import (
    Record,
    RecordReader,
    TornTail,
    count_records,
    encode_record,
)
from queen_threads.buffer.replay import Replayer
from queen_threads.buffer.writer import BufferWriter

__all__ = [
    "BufFile",
    "BufferWriter",
    "Committer",
    "FileBuffer",
    "HostLock",
    "Record",
    "RecordReader",
    "Replayer",
    "TornTail",
    "count_records",
    "database_tag",
    "encode_record",
]
