"""Wires the stream polls of one worker process: waiting for a stream's ready window.

The stream polls run on the pop long polls' machinery with their own registry, poll
workers and backoff (the ``STREAM_*`` settings) over the process's shared response
queues. Each window goes to one waiter of its consumer group; the others keep waiting.
"""

from __future__ import annotations

import time
from typing import Any

from queen_threads.polling import (
    BackoffPolicy,
    Cover,
    PollStack,
    Popper,
    ResponseQueues,
)
from queen_threads.settings import Settings
from queen_threads.streams.intention import (
    STREAM_KIND,
    StreamGroupKey,
    StreamPollIntention,
    StreamPollRequest,
)


class StreamPollingService(PollStack[StreamPollIntention]):
    """Registry + stream poll workers + the LongPollService facade, for stream polls.

    ``popper`` leases ready windows (``pop_group``/``pop_heads`` with stream lease ids,
    ``release`` gives a window back); its empty results may carry a ``wake_after`` hint
    (the time a push must reach to complete the group's next window), which
    :meth:`on_push` respects. ``responses`` are the process's response queues, shared with
    the pop long polls.
    """

    def __init__(
        self,
        settings: Settings,
        popper: Popper[StreamPollIntention],
        responses: ResponseQueues,
        worker_id: int,
        cover: Cover | None = None,
    ) -> None:
        self.settings = settings
        self.worker_id = worker_id
        policy = BackoffPolicy(
            base_ms=settings.stream_poll_interval_ms,
            threshold=settings.stream_backoff_threshold,
            multiplier=settings.stream_backoff_multiplier,
            max_ms=settings.stream_max_poll_interval_ms,
        )
        super().__init__(
            popper,
            responses,
            policy=policy,
            capacity=settings.max_poll_intentions,
            worker_count=settings.stream_poll_worker_count,
            worker_interval_ms=settings.stream_poll_worker_interval_ms,
            cleanup_threshold_s=settings.queue_backoff_cleanup_threshold_s,
            concurrent_checks=settings.stream_concurrent_checks,
            due_on_ticks=True,  # the original's loop: due groups checked every tick together
            name="queen-stream-poll",
            cover=cover,
        )

    def start(self) -> None:
        """Start the stream poll workers."""
        self.pool.start()

    def stop(self, timeout: float = 1.0) -> bool:
        """Answer every waiting stream poll 204 and stop the workers (see
        :meth:`PollWorkerPool.stop`)."""
        return self.pool.stop(timeout)

    def intention(
        self, request: StreamPollRequest, timeout_ms: int, request_id: str
    ) -> StreamPollIntention:
        """The intention of one stream poll waiting up to ``timeout_ms``."""
        created_at, deadline = self.times(timeout_ms)
        return StreamPollIntention(
            request_id=request_id,
            worker_id=self.worker_id,
            request=request,
            deadline=deadline,
            created_at=created_at,
        )

    def on_push(self, queue: str, at: float, source: str = "push") -> set[int]:
        """Messages were pushed into ``queue`` at wall-clock time ``at``: reset the stream
        groups sourcing it whose wake hint ``at`` reaches, and wake their workers.
        Returns the shards woken."""
        return self.pool.notify(queue, at=at, source=source)

    def on_group(self, stream: str, consumer_group: str, source: str = "notify") -> int | None:
        """A window of ``stream`` for ``consumer_group`` was acked, released or seeked:
        its next window may be ready now. Reset that group's backoff (dropping its wake
        hint) and wake its worker. Returns the shard woken (None: nobody waits)."""
        shard = self.registry.reset_backoff(StreamGroupKey(STREAM_KIND, stream, consumer_group))
        if shard is not None:
            self.pool.wake((shard,), source)
        return shard

    def on_event(self, event: dict[str, Any], source: str = "notify") -> None:
        """Dispatch a wake event: ``{"kind": "push", "queue": q}`` (a push into a source
        queue, timed now) or ``{"kind": "stream", "stream": s, "consumerGroup": g}`` (a
        window of that group was acked/released/seeked); anything else is ignored."""
        kind = event.get("kind")
        if kind == "push":
            queue = event.get("queue")
            if isinstance(queue, str):
                self.on_push(queue, time.time(), source)
        elif kind == "stream":
            stream, group = event.get("stream"), event.get("consumerGroup")
            if isinstance(stream, str) and isinstance(group, str):
                self.on_group(stream, group, source)
