"""Reads by offset and partition discovery (POST /api/v1/fetch, /api/v1/partitions/changed).

No lease, no cursor, no consumer group: a read changes nothing. What an offset is:
docs/reads.md and schema/migrations/0015_offset_reads.sql.
"""

from queen_threads.reads.store import ReadStore

__all__ = ["ReadStore"]
