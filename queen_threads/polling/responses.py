"""Hand-off of long-poll answers from poll workers to the waiting request greenlets."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Response:
    """An answer for one waiting request: 200 with a body, or 204 with none.

    ``lease_ids`` are the leases taken for it; whoever fails to deliver the response to
    the client must release them.
    """

    status: int
    body: bytes | None
    lease_ids: tuple[str, ...] = ()


class _Slot:
    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.response: Response | None = None


class ResponseQueue:
    """Answers for the requests of one HTTP worker process, keyed by request id.

    The request opens a slot before registering its intention, then waits on it; a poll
    worker posts at most one response into it. ``threading``
    primitives become cooperative under gevent's monkey patching.
    """

    def __init__(self, worker_id: int = 0) -> None:
        self.worker_id = worker_id
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)

    def __contains__(self, request_id: object) -> bool:
        with self._lock:
            return request_id in self._slots

    def open(self, request_id: str) -> None:
        """Create the slot for ``request_id`` (before its intention is registered)."""
        with self._lock:
            if request_id in self._slots:
                raise ValueError(f"response slot {request_id!r} already open")
            self._slots[request_id] = _Slot()

    def post(
        self, request_id: str, status: int, body: bytes | None, lease_ids: Sequence[str]
    ) -> bool:
        """Deliver the answer; False when the waiter is gone or already answered.

        On False the caller still owns ``lease_ids`` and must release them.
        """
        response = Response(status, body, tuple(lease_ids))
        with self._lock:
            slot = self._slots.get(request_id)
            if slot is None or slot.response is not None:
                return False
            slot.response = response
            slot.event.set()
            return True

    def wait(self, request_id: str, timeout: float | None) -> Response | None:
        """Block until answered or ``timeout`` seconds pass.

        Returns the response and closes the slot, or ``None`` (slot still open: wait
        again, or :meth:`abandon` it). ``None`` at once if there is no slot.
        """
        with self._lock:
            slot = self._slots.get(request_id)
        if slot is None:
            return None
        slot.event.wait(timeout)
        with self._lock:
            if slot.response is None:
                slot.event.clear()  # an interrupt() is one-shot
                return None
            self._slots.pop(request_id, None)
            return slot.response

    def interrupt(self, request_id: str) -> None:
        """Wake the waiter without an answer (e.g. its client may have disconnected):
        its :meth:`wait` returns ``None`` once, so it can check and wait again."""
        with self._lock:
            slot = self._slots.get(request_id)
            if slot is not None:
                slot.event.set()

    def abandon(self, request_id: str) -> Response | None:
        """Close the slot; return a response posted meanwhile (release its leases)."""
        with self._lock:
            slot = self._slots.pop(request_id, None)
        return None if slot is None else slot.response


class ResponseQueues:
    """The response queue of each HTTP worker, by worker id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[int, ResponseQueue] = {}

    def queue_for(self, worker_id: int) -> ResponseQueue:
        """The queue of ``worker_id``, created on first use."""
        with self._lock:
            queue = self._queues.get(worker_id)
            if queue is None:
                queue = self._queues[worker_id] = ResponseQueue(worker_id)
            return queue

    def get(self, worker_id: int) -> ResponseQueue | None:
        """The queue of ``worker_id`` if it exists."""
        with self._lock:
            return self._queues.get(worker_id)

    def post(
        self,
        worker_id: int,
        request_id: str,
        status: int,
        body: bytes | None,
        lease_ids: Sequence[str],
    ) -> bool:
        """Post to ``worker_id``'s queue; False if nobody waits (release the leases)."""
        queue = self.get(worker_id)
        return queue is not None and queue.post(request_id, status, body, lease_ids)
