"""What the registry and the poll workers need of any kind of waiting long poll
(:class:`Intention`), the key of its group and what a push may match (:class:`GroupSelector`).
The kinds live with what they wait for: the queue's pops in ``queue/intention.py``, the
stream polls in ``streams/intention.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

__all__ = ["GroupSelector", "GroupingKey", "Intention", "IntentionT"]

GroupingKey = tuple[str | None, ...]
"""Any grouping key: a tuple (in practice a NamedTuple, such as the queue's ``GroupKey``) whose
first part names its kind, so keys of different kinds never collide; never a joined
string."""


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
