"""Index from a push (queue, namespace, task) to the group keys it may satisfy."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from .intention import GroupingKey, GroupSelector

_Scope = tuple[str | None, str | None]
_K = TypeVar("_K")


class WakeIndex:
    """Candidate group keys per queue name and per (namespace, task) scope.

    A push must find its waiting groups without scanning every group in the process.
    Not thread-safe: the registry calls it under its lock.
    """

    def __init__(self) -> None:
        self._by_queue: dict[str, set[GroupingKey]] = {}
        self._by_scope: dict[_Scope, set[GroupingKey]] = {}

    def add(self, key: GroupingKey, selector: GroupSelector) -> None:
        """Remember that group ``key`` waits for ``selector``."""
        if selector.queue is not None:
            self._by_queue.setdefault(selector.queue, set()).add(key)
        else:
            self._by_scope.setdefault((selector.namespace, selector.task), set()).add(key)

    def discard(self, key: GroupingKey, selectors: Iterable[GroupSelector]) -> None:
        """Forget group ``key`` under each of ``selectors``."""
        for selector in selectors:
            if selector.queue is not None:
                _discard(self._by_queue, selector.queue, key)
            else:
                _discard(self._by_scope, (selector.namespace, selector.task), key)

    def candidates(self, queue: str, namespace: str | None, task: str | None) -> set[GroupingKey]:
        """Group keys that may wait for messages of ``queue`` (with that namespace/task)."""
        found = set(self._by_queue.get(queue, ()))
        for scope in {(namespace, task), (namespace, None), (None, task), (None, None)}:
            found.update(self._by_scope.get(scope, ()))
        return found


def _discard(buckets: dict[_K, set[GroupingKey]], bucket: _K, key: GroupingKey) -> None:
    keys = buckets.get(bucket)
    if keys is None:
        return
    keys.discard(key)
    if not keys:
        del buckets[bucket]
