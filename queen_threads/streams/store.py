"""Streams over the database: define, poll, ack, renew, seek, release and the admin reads.

The rules live in the stored functions (schema/functions/97_streams.sql); this class only
carries values to them as bind parameters and decrypts the payloads of encrypted source
queues on the way out (the same way pops do).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from queen_threads.db import Database
from queen_threads.queue.store import QueueStore


class StreamObserver(Protocol):
    """Sees what the database did (streams/metrics.py counts it)."""

    def polled(self, results: Sequence[dict[str, Any]]) -> None: ...

    def acked(self, result: dict[str, Any]) -> None: ...


class StreamStore:
    """The stream statements of `schema/queries/streams.sql`."""

    def __init__(
        self, db: Database, queues: QueueStore, observer: StreamObserver | None = None
    ) -> None:
        self.db = db
        self._queues = queues
        self.observer = observer

    def define(self, definition: dict[str, Any]) -> dict[str, Any]:
        """Create, keep or replace a definition; {error: ...} when it cannot."""
        return dict(self.db.call("stream_define", definition))

    def sources(self, stream: str) -> tuple[str, ...] | None:
        """The source queue names of `stream`; None when it does not exist."""
        names = self.db.value("stream_sources", {"name": stream})
        return None if names is None else tuple(names)

    def poll(self, requests: Sequence[dict[str, Any]], stop_on_empty: bool) -> list[dict[str, Any]]:
        """Lease a ready window for each request ({idx, stream, consumerGroup, leaseId})."""
        results: list[dict[str, Any]] = self.db.call(
            "stream_poll", {"requests": list(requests), "stopOnEmpty": stop_on_empty}
        )
        for result in results:
            window = result.get("window")
            if window:
                for message in window.get("messages") or ():
                    self._queues.open_message(message)
        if self.observer is not None:
            self.observer.polled(results)
        return results

    def ack(self, lease_id: str, success: bool) -> dict[str, Any]:
        result = dict(self.db.call("stream_ack", {"leaseId": lease_id, "success": success}))
        if self.observer is not None:
            self.observer.acked(result)
        return result

    def renew(self, lease_id: str, extend_ms: int) -> dict[str, Any] | None:
        result = self.db.call("stream_renew", {"leaseId": lease_id, "extendMs": extend_ms})
        return dict(result) if result is not None else None

    def release(self, lease_ids: Sequence[str]) -> int:
        """End leases whose windows never reached their client: delivered again at once."""
        if not lease_ids:
            return 0
        return int(self.db.call("stream_release", {"leaseIds": list(lease_ids)}))

    def seek(self, body: dict[str, Any]) -> dict[str, Any] | None:
        result = self.db.call("stream_seek", body)
        return dict(result) if result is not None else None

    # -- administration -------------------------------------------------------------
    def list_streams(self, namespace: str | None) -> list[dict[str, Any]]:
        return list(self.db.json("stream_list", {"namespace": namespace}))

    def stats(self) -> dict[str, Any]:
        return dict(self.db.json("stream_stats"))

    def detail(self, name: str) -> dict[str, Any] | None:
        return self.db.json("stream_detail", {"name": name})

    def consumers(self, name: str) -> list[dict[str, Any]] | None:
        return self.db.json("stream_consumers", {"name": name})

    def delete(self, name: str) -> bool:
        return bool(self.db.value("stream_delete", {"name": name}))
