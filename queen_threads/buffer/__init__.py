"""Failover file buffer: pushes that cannot reach PostgreSQL are kept in local files and
replayed, in push order, once the database answers again."""

from queen_threads.buffer.buffer import (
    BufferWriter,
    FileBuffer,
    RecordReader,
    database_tag,
    encode_record,
)

__all__ = ["BufferWriter", "FileBuffer", "RecordReader", "database_tag", "encode_record"]
