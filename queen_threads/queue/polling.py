"""Wires the long-poll machinery of one worker process to the database and to wake-ups."""

from __future__ import annotations

import logging
import threading
from typing import Any

from queen_threads.polling import (
    BackoffPolicy,
    Cover,
    DelayedWakeups,
    PollIntention,
    PollStack,
    PopRequest,
    ResponseQueues,
)
from queen_threads.queue.popper import DbPopper
from queen_threads.queue.store import QueueStore
from queen_threads.settings import Settings

log = logging.getLogger("queen_threads.polling")


class PollingService(PollStack[PollIntention]):
    """Registry + poll-worker pool + response queues + the LongPollService facade, for the
    ``wait=true`` pops; ``responses`` (created here) is shared with the stream polls."""

    def __init__(
        self,
        settings: Settings,
        store: QueueStore,
        worker_id: int,
        cover: Cover | None = None,
    ) -> None:
        self.settings = settings
        self.worker_id = worker_id
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
        )
        self.delayed = DelayedWakeups(lambda event: self._notify(event, "retry"))
        self._stopped = threading.Event()

    def start(self) -> None:
        self.pool.start()
        self.delayed.start()

    def stop(self, timeout: float = 1.0) -> bool:
        self._stopped.set()
        delayed_stopped = self.delayed.stop(timeout)
        return self.pool.stop(timeout) and delayed_stopped

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

        A freed lease whose message waits for a retry (``delayMs``, sent by the ack's
        NOTIFY) wakes them when the wait is over: woken now, they would find nothing.
        """
        delay_ms = event.get("delayMs")
        if isinstance(delay_ms, int | float) and not isinstance(delay_ms, bool) and delay_ms > 0:
            self.delayed.schedule(
                delay_ms / 1000.0, {k: v for k, v in event.items() if k != "delayMs"}
            )
            return
        self._notify(event, source)

    def _notify(self, event: dict[str, Any], source: str) -> None:
        queue = event.get("queue")
        if not isinstance(queue, str):
            return
        group = event.get("consumerGroup") if event.get("kind") == "free" else None
        self.pool.notify(
            queue,
            event.get("partition"),
            group if isinstance(group, str) else None,
            namespace=event.get("namespace") or None,
            task=event.get("task") or None,
            source=source,
        )

    def stats(self) -> dict[str, object]:
        """The pool's counters and the delayed (retry) wake-ups."""
        return {**super().stats(), "delayedWakeups": self.delayed.stats()}
