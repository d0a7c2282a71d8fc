"""Injectable monotonic clocks, so every timing decision can be tested without sleeping."""

from __future__ import annotations

from collections.abc import Callable

Clock = Callable[[], float]
"""A function returning monotonic seconds, like :func:`time.monotonic`."""


class ManualClock:
    """A clock that only moves when told to; for deterministic tests."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` and return the new time."""
        self.now += seconds
        return self.now
