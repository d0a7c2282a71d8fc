"""Linger: under load, a woken long poll waits a few milliseconds for company.

A group whose messages arrive one at a time, faster than its consumers come back, would be
answered one message per pop: each pop and each ack costs a request and a database call
for one message. Kafka's consumers avoid that on purpose (``fetch.min.bytes`` with
``fetch.max.wait.ms``). Here the poll worker does: a group's partitions that receive
messages faster than one per BUSY_GAP * ``max_s`` are *busy*, and a message arriving in a busy
partition makes the group due when that partition is *ripe*: its oldest unserved message
has waited ``max_s``, or it holds a full batch for the group's oldest waiting pop. A
message in a quiet partition (the lone message of an idle queue) makes the group due at
once, as without linger, so an idle queue keeps its wake latency.

What the poll worker knows are *hints* from the wake-ups (a push names its partition and
how many messages it stored): they only ever delay a pop by at most ``max_s`` from a
message's arrival, never past the waiting poll's deadline, and a pop always takes what the
database has, hinted or not. A hint the round may not have seen (its wake-up came after
the round began) survives the round.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# A partition counts as busy while its wake-ups come at least every BUSY_GAP * `max_s` on
# average (an exponentially weighted mean of the gaps, this weight on the newest) and the
# last one is at most _BUSY_FOR `max_s` old. At the limit a message waits `max_s` for a
# third of another: worth a pop and an ack less in three; an idle queue's gaps are
# seconds long.
BUSY_GAP = 3.0
_GAP_WEIGHT = 0.25
_BUSY_FOR = 20.0
# The most partitions a group keeps hints for (namespace pops span many): beyond it a
# wake-up makes the group due at once.
MAX_HINTS = 256
# A ripe time stays this far before the waiting poll's deadline, so that the poll is
# answered with its messages rather than expire beside them.
DEADLINE_MARGIN_S = 0.002


@dataclass(frozen=True, slots=True)
class LingerPolicy:
    """``max_s``: the longest a message waits for company (POLL_LINGER_MAX_MS); 0: off."""

    max_s: float = 0.0

    @property
    def enabled(self) -> bool:
        return self.max_s > 0


@dataclass(slots=True)
class _Hint:
    last_at: float
    gap: float
    count: int = 0  # messages arrived and not served yet (as far as wake-ups tell)
    first_at: float | None = None  # when the oldest of them arrived


@dataclass(slots=True)
class Pending:
    """The hints of one group, by partition (None: a wake-up that named none)."""

    hints: dict[str | None, _Hint] = field(default_factory=dict)

    def arrived(
        self, partition: str | None, count: int, now: float, batch: int, policy: LingerPolicy
    ) -> float | None:
        """A wake-up: ``count`` messages reached ``partition``. Returns when the group is
        due for them: ``now`` for a quiet partition (ripe at once) or when they fill a
        batch, later for a busy one; None when the group should pop everything it can
        now, knowing nothing precise (an unnamed partition, too many partitions)."""
        hint = self.hints.get(partition)
        if hint is None:
            if partition is None or len(self.hints) >= MAX_HINTS:
                return None
            # A first wake-up counts as after a long gap: quiet until proven busy.
            hint = self.hints[partition] = _Hint(now, _BUSY_FOR * policy.max_s)
        else:
            gap = min(now - hint.last_at, _BUSY_FOR * policy.max_s)
            hint.gap += _GAP_WEIGHT * (gap - hint.gap)
            hint.last_at = now
        hint.count += max(1, count)
        if hint.first_at is None:
            hint.first_at = now
        return self._ripe(hint, batch, policy)

    def freed(self, partition: str | None, batch: int, policy: LingerPolicy) -> float | None:
        """A lease on ``partition`` was given back: when the group is due for what waits
        there (its hint's ripe time), or None: at once (nothing known about it)."""
        hint = self.hints.get(partition)
        if hint is None or hint.first_at is None:
            return None
        return self._ripe(hint, batch, policy)

    def busy(self, now: float, policy: LingerPolicy) -> bool:
        """Whether any partition of the group is busy now (the group lingers)."""
        limit = _BUSY_FOR * policy.max_s
        busy = BUSY_GAP * policy.max_s
        return any(h.gap <= busy and now - h.last_at <= limit for h in self.hints.values())

    def next_ripe(self, batch: int, policy: LingerPolicy) -> float | None:
        """The earliest ripe time of the hinted messages (None: no hint pending)."""
        times = [self._ripe(h, batch, policy) for h in self.hints.values() if h.first_at]
        return min(times) if times else None

    def ripe(self, now: float, batch: int, policy: LingerPolicy) -> list[str]:
        """The partitions ripe at ``now``, the longest ripe first."""
        ripe = [
            (self._ripe(h, batch, policy), name)
            for name, h in self.hints.items()
            if name is not None and h.first_at and self._ripe(h, batch, policy) <= now
        ]
        return [name for _, name in sorted(ripe)]

    def served(self, partitions: set[str], since: float) -> None:
        """A round that began at ``since`` took ``partitions``: their hints of messages
        that arrived before it began are served (the pop saw them); a later wake-up's
        message may not have been seen, and keeps its hint."""
        for name in partitions:
            hint = self.hints.get(name)
            if hint is None or hint.first_at is None:
                continue
            if hint.last_at > since:
                hint.count, hint.first_at = 1, hint.last_at
            else:
                hint.count, hint.first_at = 0, None

    def empty(self, since: float) -> None:
        """A pop found nothing it could take: every hint from before ``since`` is stale
        (served elsewhere, or in a partition another consumer holds: its release wakes)."""
        for hint in self.hints.values():
            if hint.first_at is not None and hint.last_at <= since:
                hint.count, hint.first_at = 0, None

    def forget_idle(self, now: float, policy: LingerPolicy) -> None:
        """Drop the hints of partitions silent for long (bounded memory)."""
        limit = 50 * _BUSY_FOR * policy.max_s
        for name in [
            n for n, h in self.hints.items() if h.first_at is None and now - h.last_at > limit
        ]:
            del self.hints[name]

    @staticmethod
    def _ripe(hint: _Hint, batch: int, policy: LingerPolicy) -> float:
        assert hint.first_at is not None
        if hint.count >= batch or hint.gap > BUSY_GAP * policy.max_s:  # full, or quiet
            return hint.first_at if hint.count < batch else hint.last_at
        return hint.first_at + policy.max_s
