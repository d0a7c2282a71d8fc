"""Wires the long-poll machinery of one worker process to the database and to wake-ups."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from queen_threads.polling import (
    BackoffPolicy,
    Cover,
    LingerPolicy,
    PollStack,
    Response,
    ResponseQueues,
    Watch,
)
from queen_threads.queue.intention import PollIntention, PopRequest
from queen_threads.queue.popper import DbPopper
from queen_threads.queue.store import QueueStore
from queen_threads.settings import Settings

log = logging.getLogger("queen_threads.polling")


class WaitObserver(Protocol):
    """Hears the end of every long-poll wait: its answer (None: the client left), or
    `refused` when the registry would not take it (queue/metrics.py counts them)."""

    def waited(self, intention: PollIntention, answer: Response | None, refused: bool) -> None: ...


class PollingService(PollStack[PollIntention]):
    """Registry + poll-worker pool + response queues + the LongPollService facade, for the
    ``wait=true`` pops; ``responses`` (created here) is shared with the stream polls."""

    def __init__(
        self,
        settings: Settings,
        store: QueueStore,
        worker_id: int,
        cover: Cover | None = None,
        observer: WaitObserver | None = None,
    ) -> None:
        self.settings = settings
        self.worker_id = worker_id
        self.observer = observer
        policy = BackoffPolicy(
            base_ms=settings.poll_db_interval_ms,
            threshold=settings.queue_backoff_threshold,
            multiplier=settings.queue_backoff_multiplier,
            max_ms=settings.queue_max_poll_interval_ms,
        )
        super().__init__(
            DbPopper(store),
            ResponseQueues(),
            policy=policy,
            capacity=settings.max_poll_intentions,
            worker_count=settings.poll_worker_count,
            worker_interval_ms=settings.poll_worker_interval_ms,
            cleanup_threshold_s=settings.queue_backoff_cleanup_threshold_s,
            cover=cover,
            linger=LingerPolicy(settings.poll_linger_max_ms / 1000.0),
            batch_of=lambda intention: intention.request.batch,
        )

    def start(self) -> None:
        self.pool.start()

    def wait(
        self,
        intention: PollIntention,
        is_disconnected: Callable[[], bool],
        watch: Watch | None = None,
    ) -> Response | None:
        """Wait as every long poll does; the observer hears each wait's end."""
        if self.observer is None:
            return super().wait(intention, is_disconnected, watch)
        answer, refused = None, True
        try:
            answer = super().wait(intention, is_disconnected, watch)
            refused = False
            return answer
        finally:
            self.observer.waited(intention, answer, refused)

    def stop(self, timeout: float = 1.0) -> bool:
        return self.pool.stop(timeout)

    def intention(self, request: PopRequest, timeout_ms: int, request_id: str) -> PollIntention:
        created_at, deadline = self.times(timeout_ms)
        return PollIntention(
            request_id=request_id,
            worker_id=self.worker_id,
            request=request,
            deadline=deadline,
            created_at=created_at,
        )

    def on_event(self, event: dict[str, Any], source: str = "notify") -> None:
        """A push or a freed lease somewhere: wake the groups that may now get messages.

        A freed lease whose message waits for a retry (the ack's ``delayMs``) wakes them
        at once too: their pop finds nothing yet but says when the retry is due, and
        their poll worker pops again then (schema/functions/29_pop_due.sql), by the
        database's clock, in every process that waits, including those whose long polls
        arrive after this event.
        """
        queue = event.get("queue")
        if not isinstance(queue, str):
            return
        group = event.get("consumerGroup") if event.get("kind") == "free" else None
        count = event.get("count")
        self.pool.notify(
            queue,
            event.get("partition"),
            group if isinstance(group, str) else None,
            namespace=event.get("namespace") or None,
            task=event.get("task") or None,
            source=source,
            count=count if isinstance(count, int) and count > 0 else 1,
        )
