"""The registry of waiting long polls of one process, grouped for the poll workers."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Generic

from .backoff import BackoffPolicy, BackoffState
from .clock import Clock
from .deadlines import DeadlineHeap
from .errors import RegistryClosed, RegistryFull
from .intention import GroupingKey, GroupSelector, IntentionT
from .linger import DEADLINE_MARGIN_S, LingerPolicy, Pending
from .sharding import shard_of
from .wake_index import WakeIndex


@dataclass(slots=True)
class _Group:
    shard: int
    backoff: BackoffState
    waiting: dict[str, None] = field(default_factory=dict)  # request ids, FIFO
    selectors: set[GroupSelector] = field(default_factory=set)
    # Set when a push or a first registration arrives while a round is in flight, so that
    # the round's outcome does not push the group back into backoff (lost wake-up).
    poked: bool = False
    # The popper's hint after an empty round: a push before this wall-clock time cannot
    # make the group's next result non-empty (None: any push may). Cleared by every reset.
    wake_after: float | None = None
    # What the wake-ups said arrived and was not served yet, by partition (linger.py).
    pending: Pending = field(default_factory=Pending)
    # Due at once for a reason a lingering message must not defer (a reset: a message in
    # a quiet partition, a released lease nothing is known of); cleared when a round starts.
    immediate: bool = False
    # Made due at once by a wake-up or a first registration (cleared when a round starts):
    # its round goes before those of groups whose backoff came (due_groups).
    woken: bool = False
    # Reset for a reason the hints do not cover (a wake-up without a partition, a released
    # lease nothing is known of, reset_backoff): the next round pops until a pop comes back
    # empty, as without linger; `draining` is that round's copy.
    full_round: bool = False
    draining: bool = False


@dataclass(frozen=True, slots=True)
class RegistryStats:
    """Point-in-time counts of the registry."""

    intentions: int
    groups: int
    in_flight: int
    backoff_states: int
    capacity: int
    groups_per_shard: tuple[int, ...]
    registered: int = 0
    rejected: int = 0


class PollIntentionRegistry(Generic[IntentionT]):
    """Every waiting long poll of one kind in this process, with per-group backoff and
    in-flight marks. Any :class:`~.intention.Intention` fits: the pop long polls'
    :class:`PollIntention` and the stream polls' ``StreamPollIntention`` each get a
    registry of their own.

    One lock guards: intentions by request id; per grouping key the FIFO of waiting
    request ids; the in-flight keys; the per-key backoff states; per shard (poll worker) a
    min-heap of (deadline, request id). A key belongs to shard ``shard_of(key, workers)``.

    A group whose first intention arrives is due at once (no first-check delay); later
    arrivals join the FIFO and wait for the group's next round, a push, or their deadline.

    Wake hints: after an empty round the group keeps the popper's ``wake_after`` (see
    :class:`PopResult`), and a push that says when it happened (``reset_matching(at=)``)
    earlier than that leaves the group alone. A hint never outlives a reset: every reset
    (a push at or after the hint, a push without a time, :meth:`reset_backoff`, the first
    registration of a group) clears it, a round that delivered clears it, and a round
    during which the group was reset or poked stores none (its pop may predate the reset).
    """

    def __init__(
        self,
        capacity: int = 10_000,
        policy: BackoffPolicy | None = None,
        worker_count: int = 2,
        clock: Clock = time.monotonic,
        linger: LingerPolicy | None = None,
        batch_of: Callable[[IntentionT], int] | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"registry capacity must be >= 1, got {capacity}")
        if worker_count < 1:
            raise ValueError(f"poll worker count must be >= 1, got {worker_count}")
        self.capacity = capacity
        self.policy = policy or BackoffPolicy()
        self.worker_count = worker_count
        self._clock = clock
        self.linger = linger if linger is not None and linger.enabled else None
        self._batch_of = batch_of or (lambda _intention: 1)
        self._lock = threading.Lock()
        self._closed = False
        self._intentions: dict[str, IntentionT] = {}
        self._groups: dict[GroupingKey, _Group] = {}
        self._in_flight: set[GroupingKey] = set()
        self._active: list[dict[GroupingKey, None]] = [{} for _ in range(worker_count)]
        self._heaps = [DeadlineHeap() for _ in range(worker_count)]
        self._live: list[int] = [0] * worker_count
        self._index = WakeIndex()
        self._registered = 0
        self._rejected = 0

    # -- intentions ---------------------------------------------------------------------

    def register(self, intention: IntentionT) -> int:
        """Add ``intention``; return the shard that owns its group (wake that worker).

        Raises :class:`RegistryFull` at capacity and :class:`RegistryClosed` after
        :meth:`close`; never drops an intention silently.
        """
        key = intention.grouping_key()
        with self._lock:
            if self._closed:
                self._rejected += 1
                raise RegistryClosed()
            if intention.request_id in self._intentions:
                raise ValueError(f"request id {intention.request_id!r} already registered")
            if len(self._intentions) >= self.capacity:
                self._rejected += 1
                raise RegistryFull(self.capacity)
            self._registered += 1
            now = self._clock()
            group = self._groups.get(key)
            if group is None:
                group = _Group(shard_of(key, self.worker_count), self.policy.new_state(now))
                self._groups[key] = group
            if not group.waiting:
                self._active[group.shard][key] = None
                group.backoff.last_query = None
                group.backoff.timer = None
                group.wake_after = None  # a first registration is a reset: a fresh round
                group.poked = key in self._in_flight
                group.woken = True
                if self.linger is not None and group.pending.busy(now, self.linger):
                    # Under load: the messages known to wait are popped when ripe.
                    ripe = group.pending.next_ripe(self._batch_of(intention), self.linger)
                    if ripe is not None and ripe > now:
                        group.backoff.last_query = now
                        group.backoff.timer = min(ripe, intention.deadline - DEADLINE_MARGIN_S)
                        group.poked = False
            group.backoff.last_accessed = now
            group.waiting[intention.request_id] = None
            for selector in intention.selectors():
                if selector not in group.selectors:
                    group.selectors.add(selector)
                    self._index.add(key, selector)
            self._intentions[intention.request_id] = intention
            self._heaps[group.shard].push(intention.deadline, intention.request_id)
            self._live[group.shard] += 1
            return group.shard

    def remove(self, request_id: str) -> IntentionT | None:
        """Remove and return the intention; ``None`` if already gone.

        This is the atomic claim: whoever removes an intention owns answering it.
        """
        with self._lock:
            return self._remove_locked(request_id)

    def get(self, request_id: str) -> IntentionT | None:
        """The intention if still waiting."""
        with self._lock:
            return self._intentions.get(request_id)

    def snapshot(self) -> list[IntentionT]:
        """Copy of every waiting intention, in registration order."""
        with self._lock:
            return list(self._intentions.values())

    def size(self) -> int:
        """Number of waiting intentions."""
        with self._lock:
            return len(self._intentions)

    def close(self) -> None:
        """Refuse new intentions from now on (shutdown)."""
        with self._lock:
            self._closed = True

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def drain(self) -> list[IntentionT]:
        """Remove and return every waiting intention (shutdown: answer them 204)."""
        with self._lock:
            drained = list(self._intentions.values())
            for intention in drained:
                self._remove_locked(intention.request_id)
            return drained

    # -- groups -------------------------------------------------------------------------

    def group_keys_for(self, shard: int) -> list[GroupingKey]:
        """Keys with waiting intentions owned by ``shard``, oldest group first."""
        with self._lock:
            return list(self._active[shard])

    def intentions_for(self, key: GroupingKey, limit: int | None = None) -> list[IntentionT]:
        """The group's waiting intentions in FIFO (registration) order; the first ``limit``
        of them when given (a hot queue may have thousands)."""
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                return []
            rids = group.waiting if limit is None else itertools.islice(group.waiting, limit)
            return [self._intentions[rid] for rid in rids]

    def head_of(self, key: GroupingKey) -> IntentionT | None:
        """The group's oldest waiting intention (no copy of the whole group)."""
        with self._lock:
            group = self._groups.get(key)
            if group is None or not group.waiting:
                return None
            return self._intentions[next(iter(group.waiting))]

    def mark_in_flight(self, key: GroupingKey) -> bool:
        """Claim ``key`` for one pop round; False if another round holds it."""
        with self._lock:
            if key in self._in_flight:
                return False
            self._in_flight.add(key)
            group = self._groups.get(key)
            if group is not None:
                group.poked = False
                group.immediate = group.woken = False
                group.draining, group.full_round = group.full_round, False
            return True

    def unmark_in_flight(self, key: GroupingKey) -> None:
        """Release the claim taken by :meth:`mark_in_flight`."""
        with self._lock:
            self._in_flight.discard(key)

    def is_due(self, key: GroupingKey, now: float) -> bool:
        """True when the group's backoff interval has passed since its last round."""
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                return False
            group.backoff.last_accessed = now
            return group.backoff.is_due(now)

    def due_keys(self, shard: int, now: float) -> list[GroupingKey]:
        """``shard``'s waiting groups that are due and not in flight (one lock round)."""
        with self._lock:
            due = []
            for key in self._active[shard]:
                backoff = self._groups[key].backoff
                backoff.last_accessed = now
                if key not in self._in_flight and backoff.is_due(now):
                    due.append(key)
            return due

    def due_groups(self, shard: int, now: float) -> tuple[list[GroupingKey], list[GroupingKey]]:
        """``shard``'s due groups not in flight, in two lists: those woken (a wake-up or a
        first registration made them due at once) and the others (their backoff or due
        time came). A woken group's poll should not wait for the others' round."""
        with self._lock:
            woken: list[GroupingKey] = []
            rest: list[GroupingKey] = []
            for key in self._active[shard]:
                group = self._groups[key]
                group.backoff.last_accessed = now
                if key not in self._in_flight and group.backoff.is_due(now):
                    (woken if group.woken else rest).append(key)
            return woken, rest

    def record_round(
        self,
        key: GroupingKey,
        had_messages: bool,
        now: float,
        wake_after: float | None = None,
        timer: float | None = None,
        taken: Collection[str] = (),
        emptied: Collection[str] = (),
    ) -> None:
        """Apply the outcome of the round on ``key`` that started at ``now``.

        ``wake_after`` is the hint of the empty result that ended the round (the head's
        :attr:`PopResult.wake_after`); it is kept only for an empty round during which
        the group was not reset or poked, and replaces any earlier hint.

        ``timer`` is the monotonic time at which the round's last pop said something
        becomes available (:attr:`PopResult.due_in`): the group is due then at the latest.
        A round during which the group was reset or poked is due at once anyway.

        ``taken``: the partitions the round's pops delivered from (their linger hints are
        served); ``emptied``: the named partitions a pop of them found empty (their hints
        are stale; an empty pop of the whole queue makes every hint stale); with linger a
        group whose hints wait is due when the first is ripe.
        """
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                return
            self.policy.after_round(group.backoff, had_messages, now)
            group.backoff.timer = timer
            group.wake_after = None if had_messages else wake_after
            if self.linger is not None:
                group.pending.served(set(taken), now)
                if emptied:
                    group.pending.served(set(emptied), now)
                elif not had_messages:
                    group.pending.empty(now)
            if self.linger is not None and group.waiting:
                head = self._intentions[next(iter(group.waiting))]
                ripe = group.pending.next_ripe(self._batch_of(head), self.linger)
                if ripe is not None:
                    ripe = min(ripe, head.deadline - DEADLINE_MARGIN_S)
                    group.backoff.timer = ripe if timer is None else min(timer, ripe)
            if group.poked:
                group.backoff.last_query = None
                group.backoff.timer = None
                group.wake_after = None
                group.poked = False

    def linger_next(
        self, key: GroupingKey, taken: Collection[str], since: float
    ) -> list[str] | None:
        """During a round that began at ``since`` and delivered from ``taken`` (nothing yet
        at its start): the partitions to pop the group's next polls from, one each, the
        longest ripe first, or None when the group does not linger (pop any partition,
        until a pop comes back empty). A lingering group pops only its ripe partitions, by
        name (another process's poll worker may have taken one: that pop comes back empty;
        a pop of the whole queue would take the next partition, not yet ripe); the rest
        wait until theirs are."""
        if self.linger is None:
            return None
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                return []
            group.pending.served(set(taken), since)
            now = self._clock()
            if not group.waiting:
                return []
            if group.draining or not group.pending.busy(now, self.linger):
                return None
            head = self._intentions[next(iter(group.waiting))]
            return group.pending.ripe(now, self._batch_of(head), self.linger)

    def backoff_state(self, key: GroupingKey) -> BackoffState | None:
        """A copy of the key's backoff state, if any."""
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                return None
            b = group.backoff
            return BackoffState(
                b.consecutive_empty, b.interval_ms, b.last_accessed, b.last_query, b.timer
            )

    def wake_after(self, key: GroupingKey) -> float | None:
        """The group's stored wake hint (None: none, or no such group)."""
        with self._lock:
            group = self._groups.get(key)
            return None if group is None else group.wake_after

    def reset_backoff(self, key: GroupingKey) -> int | None:
        """Reset one key to the base interval, due at once, and drop its wake hint; return
        its shard if it exists."""
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                return None
            self._reset_locked(key, group)
            return group.shard

    def reset_matching(
        self,
        queue: str,
        partition: str | None = None,
        group: str | None = None,
        *,
        namespace: str | None = None,
        task: str | None = None,
        at: float | None = None,
        count: int = 1,
    ) -> set[int]:
        """Reset every waiting group that new messages in ``queue`` may satisfy.

        Matches ``queue:partition:g`` and ``queue:*:g`` (every partition when
        ``partition`` is None), for group ``g`` (any when ``group`` is None), and the
        namespace-mode keys ``ns:task:g``, ``ns:*:g``, ``*:task:g`` for the queue's
        ``namespace``/``task``. Returns the shards owning matched keys: wake them.

        ``at`` is the wall-clock time of the push when known: a matched group whose
        stored wake hint is later than ``at`` is left alone (not reset, not poked, its
        shard not returned), since its popper promised such a push cannot help it. The
        hint is respected even while the group is in flight: it stays the promise of the
        last completed round until that round records its outcome.

        With linger (linger.py) a group made busy by ``count`` messages in a busy
        ``partition`` (or by the release of a partition where such messages wait) is due
        when they are ripe instead of at once; its shard is returned only when that moves
        its due time earlier.
        """
        shards: set[int] = set()
        with self._lock:
            now = self._clock() if self.linger is not None else 0.0
            for key in self._index.candidates(queue, namespace, task):
                entry = self._groups[key]
                if at is not None and entry.wake_after is not None and entry.wake_after > at:
                    continue
                if any(
                    s.matches(queue, partition, group, namespace, task) for s in entry.selectors
                ):
                    if not entry.waiting:  # (linger) nobody waits now: what arrives meanwhile
                        if self.linger is not None and group is None:
                            entry.pending.arrived(partition, count, now, 1, self.linger)
                        continue
                    full = True
                    if self.linger is not None:
                        lingered = self._linger_locked(
                            key, entry, partition, group is not None, count, now
                        )
                        if isinstance(lingered, bool):
                            if lingered:
                                shards.add(entry.shard)
                            continue
                        full = lingered is None
                    self._reset_locked(key, entry, full)
                    shards.add(entry.shard)
        return shards

    def _linger_locked(
        self,
        key: GroupingKey,
        entry: _Group,
        partition: str | None,
        freed: bool,
        count: int,
        now: float,
    ) -> bool | str | None:
        """Apply a wake-up to a group, with linger: "now" when the group is due at once for
        hinted messages (ripe already), None when at once for a full round (nothing
        precise known); else the group is due when the messages are ripe, or earlier
        already (due now, in a round, or on an earlier timer), and True when that moved
        its due time earlier (wake its worker). Lock held."""
        assert self.linger is not None
        head = self._intentions[next(iter(entry.waiting))]
        batch = self._batch_of(head)
        if freed:
            ripe = entry.pending.freed(partition, batch, self.linger)
        else:
            ripe = entry.pending.arrived(partition, count, now, batch, self.linger)
        if ripe is None:
            return None
        ripe = min(ripe, head.deadline - DEADLINE_MARGIN_S)
        if ripe <= now:
            return "now"
        entry.wake_after = None
        if key in self._in_flight:
            return False  # its round records the next ripe time
        backoff = entry.backoff
        due = backoff.due_at()
        if due <= ripe and (due > now or entry.immediate):
            return False  # due by then anyway
        # Due later than ripe, or now only for a first check or the backoff's next look
        # (which would find just these messages): due when they are ripe.
        backoff.last_query = now
        backoff.timer = ripe
        return True

    # -- expiry and scheduling ----------------------------------------------------------

    def pop_expired(self, shard: int, now: float) -> list[IntentionT]:
        """Remove and return ``shard``'s intentions whose deadline is ``<= now``."""
        with self._lock:
            due = self._heaps[shard].pop_due(now, self._is_live)
            return [it for rid in due if (it := self._remove_locked(rid)) is not None]

    def next_deadline(self, shard: int) -> float | None:
        """Earliest deadline among ``shard``'s waiting intentions."""
        with self._lock:
            return self._heaps[shard].earliest(self._is_live)

    def next_due(self, shard: int) -> float | None:
        """Earliest time one of ``shard``'s waiting groups (not in flight) becomes due."""
        with self._lock:
            due = [
                self._groups[key].backoff.due_at()
                for key in self._active[shard]
                if key not in self._in_flight
            ]
        return min(due) if due else None

    def waiting_selectors(self) -> set[GroupSelector]:
        """The selectors of every group with a waiting intention."""
        with self._lock:
            return {s for group in self._groups.values() if group.waiting for s in group.selectors}

    def cleanup_idle(self, max_age_s: float, now: float) -> int:
        """Drop backoff states of groups without waiters idle for more than ``max_age_s``."""
        with self._lock:
            stale = [
                key
                for key, group in self._groups.items()
                if not group.waiting
                and key not in self._in_flight
                and now - group.backoff.last_accessed > max_age_s
            ]
            for key in stale:
                self._index.discard(key, self._groups.pop(key).selectors)
            if self.linger is not None:
                for group in self._groups.values():
                    group.pending.forget_idle(now, self.linger)
            return len(stale)

    def stats(self) -> RegistryStats:
        """Counts for metrics and health."""
        with self._lock:
            return RegistryStats(
                intentions=len(self._intentions),
                groups=sum(len(active) for active in self._active),
                in_flight=len(self._in_flight),
                backoff_states=len(self._groups),
                capacity=self.capacity,
                groups_per_shard=tuple(len(active) for active in self._active),
                registered=self._registered,
                rejected=self._rejected,
            )

    # -- internals (lock held) ----------------------------------------------------------

    def _remove_locked(self, request_id: str) -> IntentionT | None:
        intention = self._intentions.pop(request_id, None)
        if intention is None:
            return None
        key = intention.grouping_key()
        group = self._groups[key]
        del group.waiting[request_id]
        self._live[group.shard] -= 1
        if not group.waiting:
            del self._active[group.shard][key]
            if self.linger is None:
                self._index.discard(key, group.selectors)
                group.selectors.clear()
            # (with linger the group stays indexed: its hints go on counting what arrives
            # while its consumers are away, until it is cleaned up)
            group.backoff.last_accessed = self._clock()
        self._heaps[group.shard].maybe_compact(self._live[group.shard], self._is_live)
        return intention

    def _reset_locked(self, key: GroupingKey, group: _Group, full: bool = True) -> None:
        self.policy.reset(group.backoff)
        group.wake_after = None
        group.immediate = group.woken = True
        group.full_round = group.full_round or full
        if key in self._in_flight:
            group.poked = True

    def _is_live(self, deadline: float, request_id: str) -> bool:
        intention = self._intentions.get(request_id)
        return intention is not None and intention.deadline == deadline


__all__ = ["PollIntentionRegistry", "RegistryStats"]
