"""What a pop asks for (``PopRequest``: built once from the HTTP request, carried unchanged
to the poll worker and to the stored function) and a waiting long pop (``PollIntention``):
the queue's own kind of the polling package's :class:`~queen_threads.polling.Intention`,
as the streams keep theirs in ``streams/intention.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from queen_threads.polling import GroupSelector

__all__ = ["QUEUE_MODE", "GroupKey", "PollIntention", "PopRequest"]

QUEUE_MODE = "__QUEUE_MODE__"
"""Consumer group of competing consumers that share one cursor (no ``consumerGroup``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PopRequest:
    """One pop: either ``queue`` (optionally with ``partition``) or ``namespace``/``task``.

    ``batch`` is the most messages to take (the global cap when ``partitions`` > 1);
    ``auto_ack`` asks for the messages to be consumed on delivery.
    """

    queue: str | None = None
    partition: str | None = None
    namespace: str | None = None
    task: str | None = None
    consumer_group: str = QUEUE_MODE
    batch: int = 1
    partitions: int = 1
    subscription_mode: str | None = None
    subscription_from: str | None = None
    auto_ack: bool = False
    lease_seconds: int | None = None  # this pop's lease instead of the queue's leaseTime
    # pop autopilot: the server sizes the dimensions the client left out (queen._autopilot)
    autopilot_batch: bool = False
    autopilot_partitions: bool = False
    conflation: bool = False  # asked for; the group's stored policy decides (26_conflation.sql)

    def __post_init__(self) -> None:
        if self.batch < 1:
            raise ValueError(f"batch must be >= 1, got {self.batch}")
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions}")
        if self.queue is None and self.partition is not None:
            raise ValueError("a partition needs a queue")

    @property
    def namespace_mode(self) -> bool:
        """True for ``/api/v1/pop?namespace=&task=`` (no queue)."""
        return self.queue is None

    def arguments(
        self,
        lease_id: str,
        *,
        idx: int = 0,
        stop_on_empty: bool = False,
        auto_ack: bool | None = None,
    ) -> dict[str, Any]:
        """The stored function's input for this pop (``queen.pop_unified_batch``), with its
        own lease; ``auto_ack`` overrides the request's (long polls acknowledge after the
        answer was written, so they pop with a lease)."""
        return {
            "idx": idx,
            "queue": self.queue,
            "partition": self.partition,
            "namespace": self.namespace,
            "task": self.task,
            "consumerGroup": self.consumer_group,
            "batch": self.batch,
            "partitions": self.partitions,
            "leaseId": lease_id,
            "autoAck": self.auto_ack if auto_ack is None else auto_ack,
            "subscriptionMode": self.subscription_mode,
            "subscriptionFrom": self.subscription_from,
            "stopOnEmpty": stop_on_empty,
            "leaseSeconds": self.lease_seconds,
            "autopilotBatch": self.autopilot_batch,
            "autopilotPartitions": self.autopilot_partitions,
            "conflation": self.conflation,
        }


class GroupKey(NamedTuple):
    """The grouping key of waiting long polls: a tuple, never a joined string, because
    names may contain any character (queue ``a:b`` partition ``c`` and queue ``a``
    partition ``b:c`` must not share a group), and ``kind`` keeps a queue apart from a
    namespace of the same name. ``None`` is an unset part (a wildcard pop, a namespace
    without a task), distinct from every name."""

    kind: str  # "queue" or "namespace"
    scope: str | None  # the queue, or the namespace
    detail: str | None  # the partition, or the task
    consumer_group: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PollIntention:
    """One ``wait=true`` pop waiting in the registry until messages arrive or it expires.

    ``request`` is the pop as the HTTP layer built it; ``worker_id`` names the response
    queue of the HTTP worker that holds the request; ``deadline`` and ``created_at`` are
    monotonic seconds (the registry's clock).
    """

    request_id: str
    worker_id: int
    request: PopRequest
    deadline: float
    created_at: float

    def grouping_key(self) -> GroupKey:
        """(queue, queue, partition, group) or (namespace, namespace, task, group)."""
        r = self.request
        if r.queue is not None:
            return GroupKey("queue", r.queue, r.partition, r.consumer_group)
        return GroupKey("namespace", r.namespace, r.task, r.consumer_group)

    def selector(self) -> GroupSelector:
        """What this intention waits for, for push wake-ups."""
        r = self.request
        if r.queue is not None:
            return GroupSelector(r.queue, r.partition, None, None, r.consumer_group)
        return GroupSelector(None, None, r.namespace, r.task, r.consumer_group)

    def selectors(self) -> tuple[GroupSelector, ...]:
        """The one selector of :meth:`selector` (the :class:`Intention` protocol)."""
        return (self.selector(),)
