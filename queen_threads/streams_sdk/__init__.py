"""The official clients' streaming SDK on this server (/streams/v1/*, docs/streams.md):
query registration, exactly-once cycle commits and state reads. The SDK runs the operators;
the server keeps the queries and their per-partition state, and commits each cycle (state,
sink pushes, source ack) in one PostgreSQL transaction."""

from queen_threads.streams_sdk.service import StreamsSdk

__all__ = ["StreamsSdk"]
