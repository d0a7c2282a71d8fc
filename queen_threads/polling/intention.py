"""A waiting long poll (``PollIntention``), the group it belongs to, and what the
registry and the poll workers need of any kind of waiting long poll (:class:`Intention`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

from .request import QUEUE_MODE, PopRequest

__all__ = [
    "QUEUE_MODE",
    "GroupKey",
    "GroupSelector",
    "GroupingKey",
    "Intention",
    "IntentionT",
    "PollIntention",
]

GroupingKey = tuple[str | None, ...]
"""Any grouping key: a tuple (in practice a NamedTuple such as :class:`GroupKey`) whose
first part names its kind, so keys of different kinds never collide; never a joined
string."""


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


@dataclass(frozen=True, slots=True)
class GroupSelector:
    """What a group of intentions waits for; used to find the groups a push can satisfy.

    Queue mode has ``queue`` set (``partition`` None = any partition). Namespace mode has
    ``queue`` None and waits on every queue whose namespace/task match the set parts.
    """

    queue: str | None
    partition: str | None
    namespace: str | None
    task: str | None
    consumer_group: str

    def matches(
        self,
        queue: str,
        partition: str | None,
        group: str | None,
        namespace: str | None,
        task: str | None,
    ) -> bool:
        """Could new messages in ``queue``/``partition`` (of that namespace and task),
        available to ``group`` (None: to every group), satisfy this selector?"""
        if group is not None and group != self.consumer_group:
            return False
        if self.queue is not None:
            if self.queue != queue:
                return False
            return partition is None or self.partition is None or self.partition == partition
        return self.namespace in (None, namespace) and self.task in (None, task)


class Intention(Protocol):
    """What the registry, the poll workers and :class:`LongPollService` need of a waiting
    long poll, whatever it waits for (a pop's messages, a stream's window).

    ``worker_id`` names the response queue of the HTTP worker holding the request;
    ``deadline`` and ``created_at`` are monotonic seconds (the registry's clock).
    Intentions with equal :meth:`grouping_key` form one FIFO group, served one result per
    intention; :meth:`selectors` say which pushes may satisfy the group.
    """

    @property
    def request_id(self) -> str: ...

    @property
    def worker_id(self) -> int: ...

    @property
    def deadline(self) -> float: ...

    @property
    def created_at(self) -> float: ...

    def grouping_key(self) -> GroupingKey:
        """The group this intention waits in."""
        ...

    def selectors(self) -> tuple[GroupSelector, ...]:
        """Every selector a push may match to wake this intention's group."""
        ...


IntentionT = TypeVar("IntentionT", bound=Intention)
"""The kind of intention a registry, worker or service handles."""


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
