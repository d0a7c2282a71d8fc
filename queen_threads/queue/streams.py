"""Streams of one worker process: the store, the stream poll workers and their wake-ups."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from queen_threads.polling import (
    PollIntentionRegistry,
    Response,
    ResponseQueues,
    StreamPollIntention,
    StreamPollRequest,
    Watch,
)
from queen_threads.queue.stream_polling import StreamPollingService
from queen_threads.queue.stream_popper import StreamWindowPopper
from queen_threads.queue.stream_store import StreamStore
from queen_threads.settings import Settings

log = logging.getLogger("queen_threads.streams")


class Streams:
    """What the stream routes use: the store for definitions and admin reads, the stream
    polling service for waiting polls, and the wake-ups acks and seeks owe the waiters of
    their group (here at once; other processes hear the stored function's NOTIFY)."""

    def __init__(
        self, settings: Settings, store: StreamStore, responses: ResponseQueues, worker_id: int
    ) -> None:
        self.store = store
        self.popper = StreamWindowPopper(store)
        self.polling = StreamPollingService(settings, self.popper, responses, worker_id)

    @property
    def registry(self) -> PollIntentionRegistry[StreamPollIntention]:
        return self.polling.registry

    def start(self) -> None:
        self.polling.start()

    def stop(self, timeout: float = 1.0) -> bool:
        return self.polling.stop(timeout)

    def intention(
        self, request: StreamPollRequest, timeout_ms: int, request_id: str
    ) -> StreamPollIntention:
        return self.polling.intention(request, timeout_ms, request_id)

    def wait(
        self,
        intention: StreamPollIntention,
        is_disconnected: Callable[[], bool],
        watch: Watch | None = None,
    ) -> Response | None:
        return self.polling.wait(intention, is_disconnected, watch)

    def poll_once(self, request: StreamPollRequest) -> dict[str, Any] | None:
        """One look for a ready window, without waiting (a poll with timeout 0)."""
        lease = str(uuid.uuid4())
        ask = {"idx": 0, "stream": request.stream, "consumerGroup": request.consumer_group}
        results = self.store.poll([{**ask, "leaseId": lease}], stop_on_empty=True)
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

    def on_event(self, event: dict[str, Any], source: str = "notify") -> None:
        self.polling.on_event(event, source)

    def stats(self) -> dict[str, object]:
        return self.polling.stats()
