"""Streams of one worker process: what a stream route does beyond one statement."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from queen_threads.errors import NotFound
from queen_threads.streams.intention import StreamPollRequest
from queen_threads.streams.polling import StreamPollingService
from queen_threads.streams.store import StreamStore

log = logging.getLogger("queen_threads.streams")

SOURCES_TTL_S = 5.0
"""How long a process trusts the source queues it read for a stream. Every waiting stream
poll needs them (pushes into them wake it); re-reading them for each of a thousand polls
re-posted every few seconds was most of an idle server's database work. A stream defined
or deleted by another process is seen within this time (meanwhile a poll of a deleted
stream waits out its timeout and answers 204 instead of 404); unknown streams are never
cached."""


class Streams:
    """The stream routes' behaviour beyond storage: the cache of each stream's sources
    (kept true by define and delete), one look for a window without waiting, and the
    wake-ups acks and seeks owe the waiters of their group (here at once; other
    processes hear the stored function's NOTIFY). Waiting polls go to `polling`."""

    def __init__(self, store: StreamStore, polling: StreamPollingService) -> None:
        self.store = store
        self.polling = polling
        self._sources: dict[str, tuple[float, tuple[str, ...]]] = {}

    def sources(self, stream: str) -> tuple[str, ...] | None:
        """The stream's source queue names (None: no such stream), read at most every
        SOURCES_TTL_S seconds per stream."""
        now = time.monotonic()
        cached = self._sources.get(stream)
        if cached is not None and now - cached[0] < SOURCES_TTL_S:
            return cached[1]
        sources = self.store.sources(stream)
        if sources is None:
            self._sources.pop(stream, None)
        else:
            self._sources[stream] = (now, sources)
        return sources

    def define(self, definition: dict[str, Any]) -> dict[str, Any]:
        self._sources.pop(definition["name"], None)
        return self.store.define(definition)

    def delete(self, stream: str) -> bool:
        self._sources.pop(stream, None)
        return self.store.delete(stream)

    def poll_once(self, request: StreamPollRequest) -> dict[str, Any] | None:
        """One look for a ready window, without waiting (a poll with timeout 0)."""
        lease = str(uuid.uuid4())
        ask = {"idx": 0, "stream": request.stream, "consumerGroup": request.consumer_group}
        results = self.store.poll([{**ask, "leaseId": lease}], stop_on_empty=True)
        if results and results[0].get("notFound"):  # deleted since its sources were read
            self._sources.pop(request.stream, None)
            raise NotFound(f"Stream not found: {request.stream}")
        window = results[0].get("window") if results else None
        return {"window": window} if window else None

    def release(self, lease_ids: Sequence[str]) -> None:
        """Give back windows that never reached their client; their group may go on."""
        if lease_ids:
            self.store.release(lease_ids)

    def ack(self, lease_id: str, success: bool) -> dict[str, Any]:
        result = self.store.ack(lease_id, success)
        if not result.get("error"):
            self.polling.on_group(result["stream"], result["consumerGroup"], "push")
        return result

    def seek(self, body: dict[str, Any]) -> dict[str, Any] | None:
        result = self.store.seek(body)
        if result is not None:
            self.polling.on_group(result["stream"], result["consumerGroup"], "push")
        return result
