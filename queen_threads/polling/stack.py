"""One kind of long poll of one worker process, assembled: registry, poll workers, waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic

from .backoff import BackoffPolicy
from .intention import IntentionT
from .linger import LingerPolicy
from .longpoll import LongPollService, Watch
from .popper import Cover, CoveringPopper, Popper
from .registry import PollIntentionRegistry
from .responses import Response, ResponseQueues
from .worker import PollWorkerPool


class PollStack(Generic[IntentionT]):
    """A :class:`PollIntentionRegistry`, the :class:`PollWorkerPool` serving it through
    ``popper``, and the :class:`LongPollService` request greenlets wait through.
    ``cover`` (when other processes' wake-ups should reach this one) is asked before every
    pop to cover the selectors popped for (:class:`CoveringPopper`); the registry's
    :meth:`~PollIntentionRegistry.waiting_selectors` say what to keep covered meanwhile.
    ``linger`` and ``batch_of`` (an intention's batch size): see linger.py.

    The pop long polls and the stream polls each build one (their own registry, workers
    and backoff) over the process's shared :class:`ResponseQueues`.
    """

    def __init__(
        self,
        popper: Popper[IntentionT],
        responses: ResponseQueues,
        *,
        policy: BackoffPolicy,
        capacity: int,
        worker_count: int,
        worker_interval_ms: int,
        cleanup_threshold_s: float,
        concurrent_checks: int = 1,
        due_on_ticks: bool = False,
        name: str = "queen-poll",
        cover: Cover | None = None,
        linger: LingerPolicy | None = None,
        batch_of: Callable[[IntentionT], int] | None = None,
    ) -> None:
        if cover is not None:
            popper = CoveringPopper(popper, cover)
        self.registry = PollIntentionRegistry[IntentionT](
            capacity=capacity,
            policy=policy,
            worker_count=worker_count,
            linger=linger,
            batch_of=batch_of,
        )
        self.responses = responses
        self.popper = popper
        self.pool = PollWorkerPool[IntentionT](
            worker_count,
            self.registry,
            popper,
            responses,
            worker_interval_ms=worker_interval_ms,
            cleanup_threshold_s=cleanup_threshold_s,
            concurrent_checks=concurrent_checks,
            due_on_ticks=due_on_ticks,
            name=name,
        )
        self.longpoll = LongPollService[IntentionT](
            self.registry, self.pool, responses, popper, check_every_s=10.0
        )

    @staticmethod
    def times(timeout_ms: int) -> tuple[float, float]:
        """``(created_at, deadline)`` in monotonic seconds for a wait of ``timeout_ms``."""
        now = time.monotonic()
        return now, now + timeout_ms / 1000.0

    def wait(
        self,
        intention: IntentionT,
        is_disconnected: Callable[[], bool],
        watch: Watch | None = None,
    ) -> Response | None:
        """Register ``intention`` and block until answered (see
        :meth:`LongPollService.wait_for`)."""
        return self.longpoll.wait_for(intention, is_disconnected, watch)

    def stats(self) -> dict[str, object]:
        """The pool's counters and the registry's counts."""
        return self.pool.stats()
