"""One long poll end to end, for the HTTP layer: register, wake, wait, answer."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, Protocol

from .clock import Clock
from .intention import IntentionT
from .popper import LeaseReleaser
from .registry import PollIntentionRegistry
from .responses import Response, ResponseQueue, ResponseQueues

log = logging.getLogger("queen_threads.polling")

NO_CONTENT = Response(204, None, ())

Watch = Callable[[Callable[[], None]], Callable[[], None]]
"""``watch(nudge) -> cancel``: call ``nudge()`` when the client may have disconnected."""


class Waker(Protocol):
    """Something that wakes poll workers (the :class:`PollWorkerPool`)."""

    def wake(self, shards: Iterable[int], source: str = ...) -> None:
        """Wake the workers owning ``shards``."""


class LongPollService(Generic[IntentionT]):
    """Waits for the answer of one ``wait=true`` pop (or stream poll) on behalf of a request
    greenlet.

    The poll workers normally answer (200 with messages, 204 at the deadline). If they
    have not answered ``grace_s`` after the deadline (a stuck database call), the request
    claims its own intention and answers 204 itself, so every request gets an answer.
    ``is_disconnected`` is checked every ``check_every_s`` seconds while waiting; when the
    client has gone, the intention is withdrawn and any lease taken for it released.
    """

    def __init__(
        self,
        registry: PollIntentionRegistry[IntentionT],
        waker: Waker,
        responses: ResponseQueues,
        releaser: LeaseReleaser,
        *,
        clock: Clock = time.monotonic,
        grace_s: float = 1.0,
        check_every_s: float = 1.0,
    ) -> None:
        self._registry = registry
        self._waker = waker
        self._responses = responses
        self._releaser = releaser
        self._clock = clock
        self._grace_s = grace_s
        self._check_every_s = check_every_s

    def wait_for(
        self,
        intention: IntentionT,
        is_disconnected: Callable[[], bool] | None = None,
        watch: Watch | None = None,
    ) -> Response | None:
        """Register ``intention`` and block until it is answered.

        Returns the response to write (200 or 204), or ``None`` when the client
        disconnected. Raises :class:`RegistryFull` / :class:`RegistryClosed` (answer
        503). If writing a 200 fails, pass its ``lease_ids`` to :meth:`release`.
        ``watch(nudge)``, when given, arranges for ``nudge()`` to be called when the
        client may have gone (its socket became readable) and returns a cancel function:
        the disconnect check then runs on that event instead of every ``check_every_s``
        seconds, so an idle waiter does not wake at all before its deadline (after a nudge
        that was not a departure, e.g. pipelined bytes, it checks periodically again).
        """
        request_id = intention.request_id
        queue = self._responses.queue_for(intention.worker_id)
        queue.open(request_id)
        try:
            shard = self._registry.register(intention)
        except BaseException:
            queue.abandon(request_id)
            raise
        self._waker.wake((shard,), "register")
        cancel: Callable[[], None] | None = None
        try:
            if watch is not None:
                cancel = watch(lambda: queue.interrupt(request_id))
        except BaseException:
            self._withdraw(intention, deliverable=False)
            raise
        try:
            return self._wait(intention, queue, is_disconnected, event_driven=cancel is not None)
        finally:
            if cancel is not None:
                cancel()

    def _wait(
        self,
        intention: IntentionT,
        queue: ResponseQueue,
        is_disconnected: Callable[[], bool] | None,
        *,
        event_driven: bool = False,
    ) -> Response | None:
        request_id = intention.request_id
        try:
            while True:
                remaining = intention.deadline + self._grace_s - self._clock()
                if remaining <= 0:
                    break
                step = remaining if event_driven else min(self._check_every_s, remaining)
                response = queue.wait(request_id, step)
                if response is not None:
                    return response
                if self._clock() >= intention.deadline + self._grace_s:
                    break  # waited to the end
                if is_disconnected is not None and is_disconnected():
                    self._withdraw(intention, deliverable=False)
                    return None
                event_driven = False  # nudged for something else: the watch has fired
        except BaseException:
            # Killed while waiting (greenlet kill, worker exit): leave nothing behind.
            self._withdraw(intention, deliverable=False)
            raise
        log.warning("long poll %s not answered by its poll worker; answering 204", request_id)
        return self._withdraw(intention, deliverable=True) or NO_CONTENT

    def release(self, lease_ids: Sequence[str]) -> None:
        """Release leases of a response that could not be written to the client."""
        if lease_ids:
            self._releaser.release(list(lease_ids))

    def _withdraw(self, intention: IntentionT, *, deliverable: bool) -> Response | None:
        """Claim the intention back and close its slot; a response posted meanwhile is
        returned when ``deliverable``, else its leases are released."""
        self._registry.remove(intention.request_id)
        late = self._responses.queue_for(intention.worker_id).abandon(intention.request_id)
        if late is None or deliverable:
            return late
        try:
            self.release(late.lease_ids)
        except Exception:
            log.exception("releasing leases %s of a departed client failed", late.lease_ids)
        return None
