"""Min-heap of intention deadlines with lazy deletion, one per poll worker."""

from __future__ import annotations

import heapq
from collections.abc import Callable

IsLive = Callable[[float, str], bool]
"""``is_live(deadline, request_id)``: is this entry still a waiting intention?"""

# Entries of intentions answered before their deadline stay in the heap until popped;
# rebuild once they outnumber the live ones this much, so memory stays bounded.
_COMPACT_MIN = 64


class DeadlineHeap:
    """Entries ``(deadline, request_id)``; removed intentions are skipped when reached."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, deadline: float, request_id: str) -> None:
        """Track ``request_id`` until ``deadline``."""
        heapq.heappush(self._heap, (deadline, request_id))

    def pop_due(self, now: float, is_live: IsLive) -> list[str]:
        """Pop every entry with ``deadline <= now``; return the live request ids."""
        heap = self._heap
        due: list[str] = []
        while heap and heap[0][0] <= now:
            deadline, request_id = heapq.heappop(heap)
            if is_live(deadline, request_id):
                due.append(request_id)
        return due

    def earliest(self, is_live: IsLive) -> float | None:
        """The earliest live deadline (dropping dead entries on top)."""
        heap = self._heap
        while heap and not is_live(*heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def maybe_compact(self, live_count: int, is_live: IsLive) -> None:
        """Rebuild without dead entries when they dominate."""
        if len(self._heap) > _COMPACT_MIN and len(self._heap) > 2 * live_count:
            self._heap = [entry for entry in self._heap if is_live(*entry)]
            heapq.heapify(self._heap)
