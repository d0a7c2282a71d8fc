"""Per-group backoff: how long a poll worker waits before querying an empty group again."""

from __future__ import annotations

import math
from dataclasses import dataclass

# Float noise must not make a group that is due "exactly now" wait one more tick.
_EPSILON_S = 1e-9


@dataclass(slots=True)
class BackoffState:
    """Mutable backoff of one grouping key.

    ``last_query`` is ``None`` when the group is due at once (new group, or reset by a
    push/ack/notification); otherwise it is the monotonic time of the last pop round.
    ``timer`` is the monotonic time at which the last round's pop said something becomes
    available (its due time): the group is due then even if its backoff runs longer.
    """

    consecutive_empty: int = 0
    interval_ms: int = 100
    last_accessed: float = 0.0
    last_query: float | None = None
    timer: float | None = None

    def due_at(self) -> float:
        """Monotonic time from which the group may be queried again (``-inf``: now)."""
        if self.last_query is None:
            return -math.inf
        backoff = self.last_query + self.interval_ms / 1000.0
        return backoff if self.timer is None else min(backoff, self.timer)

    def is_due(self, now: float) -> bool:
        """True when at least ``interval_ms`` passed since the last query."""
        return now + _EPSILON_S >= self.due_at()


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """The backoff rules (env: POLL_DB_INTERVAL, QUEUE_BACKOFF_THRESHOLD,
    QUEUE_BACKOFF_MULTIPLIER, QUEUE_MAX_POLL_INTERVAL).

    After a round that delivered something the interval returns to ``base_ms``. After an
    empty round the empty count grows, and from ``threshold`` empty rounds on the interval
    is multiplied (truncated to whole ms) up to ``max_ms``. With the defaults:
    100 -> 200 -> 400 -> 800 -> 1600 -> 2000 ms.
    """

    base_ms: int = 100
    threshold: int = 1
    multiplier: float = 2.0
    max_ms: int = 2000

    def __post_init__(self) -> None:
        if self.base_ms < 1:
            raise ValueError(f"backoff base interval must be >= 1 ms, got {self.base_ms}")
        if self.threshold < 0:
            raise ValueError(f"backoff threshold must be >= 0, got {self.threshold}")
        if not self.multiplier >= 1.0:
            raise ValueError(f"backoff multiplier must be >= 1.0, got {self.multiplier}")
        if self.max_ms < self.base_ms:
            raise ValueError(
                f"max poll interval ({self.max_ms} ms) is below the base interval "
                f"({self.base_ms} ms)"
            )

    def new_state(self, now: float) -> BackoffState:
        """A fresh state: base interval, due at once."""
        return BackoffState(0, self.base_ms, now, None)

    def after_round(self, state: BackoffState, had_messages: bool, now: float) -> None:
        """Apply the outcome of one pop round that started at ``now``."""
        state.last_query = now
        state.last_accessed = now
        state.timer = None
        if had_messages:
            state.consecutive_empty = 0
            state.interval_ms = self.base_ms
            return
        state.consecutive_empty += 1
        if state.consecutive_empty >= self.threshold:
            state.interval_ms = min(int(state.interval_ms * self.multiplier), self.max_ms)

    def reset(self, state: BackoffState) -> None:
        """Back to the base interval and due at once (new messages may be waiting)."""
        state.consecutive_empty = 0
        state.interval_ms = self.base_ms
        state.last_query = None
        state.timer = None
