"""Poll workers: the loops that answer waiting long polls, and the pool running them."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Generic

from .clock import Clock
from .intention import GroupingKey, IntentionT
from .popper import Popper, PopResult
from .registry import PollIntentionRegistry
from .responses import ResponseQueues

log = logging.getLogger("queen_threads.polling")

HEAD_BATCH = 200
"""Groups whose head intentions are popped in one database call."""

GROUP_CHUNK_MAX = 64
"""Most intentions of one group popped for in one database call."""

WAKE_SOURCES = ("register", "push", "notify", "peer", "sibling")
"""Why a worker was woken: a new intention, a local push/ack, a LISTEN/NOTIFY, a peer (a
group's due time needs no wake-up: the worker sleeps until it, see ``timers``)."""


@dataclass(slots=True)
class WorkerCounters:
    """Monotonic counters of one poll worker."""

    rounds: int = 0
    pops: int = 0
    delivered: int = 0
    timed_out: int = 0
    released_leases: int = 0
    errors: int = 0
    timers: int = 0  # empty rounds that armed a due-time timer
    wakeups: dict[str, int] = field(default_factory=lambda: dict.fromkeys(WAKE_SOURCES, 0))


class PollWorker(Generic[IntentionT]):
    """One poll worker; owns the groups whose key hashes to ``index``.

    :meth:`run_once` does one pass: answer expired intentions with 204, run one pop
    round for each due group, and return how long to sleep. :meth:`run` loops on it,
    sleeping on a wake event so that a registration or a push interrupts the sleep.

    ``concurrent_checks`` is how many database calls popping for due groups' heads may
    run at once (1: one after another). More cut the latency of a pass over many groups
    at the cost of more calls (each chunk of heads is its own call).

    ``due_on_ticks`` (the stream poll workers): groups whose backoff interval ran out are
    checked on the worker's tick (every ``worker_interval_ms``), all of them in one pass,
    instead of each at its own moment; a wake-up (registration, push, notification) still
    runs a pass at once. Idle groups then cost one database call per tick together rather
    than one each, at most one tick late (their backoff is a safety net: wake-ups answer).
    """

    def __init__(
        self,
        index: int,
        count: int,
        registry: PollIntentionRegistry[IntentionT],
        popper: Popper[IntentionT],
        responses: ResponseQueues,
        *,
        worker_interval_ms: int = 50,
        clock: Clock = time.monotonic,
        cleanup_threshold_s: float = 3600.0,
        cleanup_every_s: float = 60.0,
        concurrent_checks: int = 1,
        due_on_ticks: bool = False,
    ) -> None:
        if not 0 <= index < count:
            raise ValueError(f"worker index {index} out of range for {count} workers")
        if count != registry.worker_count:
            raise ValueError(f"{count} workers but the registry has {registry.worker_count}")
        if worker_interval_ms < 1:
            raise ValueError(f"worker interval must be >= 1 ms, got {worker_interval_ms}")
        if concurrent_checks < 1:
            raise ValueError(f"concurrent checks must be >= 1, got {concurrent_checks}")
        self.index = index
        self.count = count
        self.counters = WorkerCounters()
        self._registry = registry
        self._popper = popper
        self._responses = responses
        self._interval_s = worker_interval_ms / 1000.0
        self._concurrent_checks = concurrent_checks
        self._due_on_ticks = due_on_ticks
        self._next_tick: float | None = None
        self._woken = False
        self._clock = clock
        self._cleanup_threshold_s = cleanup_threshold_s
        self._cleanup_every_s = cleanup_every_s
        self._next_cleanup: float | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._counter_lock = threading.Lock()

    def wake(self, source: str = "push") -> None:
        """Interrupt the worker's sleep; ``source`` is counted in ``counters.wakeups``."""
        with self._counter_lock:
            self.counters.wakeups[source] = self.counters.wakeups.get(source, 0) + 1
        self._woken = True
        self._wake.set()

    def request_stop(self) -> None:
        """Ask :meth:`run` to return after the current pass."""
        self._stopping.set()
        self._wake.set()

    def run(self) -> None:
        """Loop until :meth:`request_stop`; never dies on an error."""
        while not self._stopping.is_set():
            # Clear before the pass: a wake during the pass makes the wait return at once.
            self._wake.clear()
            try:
                timeout = self.run_once()
            except Exception:
                log.exception("poll worker %d: pass failed", self.index)
                self._count(errors=1)
                timeout = self._interval_s
            if timeout > 0:
                self._wake.wait(timeout)

    def run_once(self, now: float | None = None) -> float:
        """One pass at ``now`` (default: the clock); returns the seconds to sleep."""
        if now is None:
            now = self._clock()
        for intention in self._registry.pop_expired(self.index, now):
            self._responses.post(intention.worker_id, intention.request_id, 204, None, ())
            self._count(timed_out=1)
        if self._checks_due(now):
            # The groups a wake-up made due first, in a call of their own: their waiters
            # should not wait for the backoff pops of idle groups (on time, however many);
            # on ticks, every due group in one call.
            registry = self._registry
            rounds: Sequence[Sequence[GroupingKey]] = (
                (registry.due_keys(self.index, now),)
                if self._due_on_ticks
                else registry.due_groups(self.index, now)
            )
            for due in rounds:
                if len(due) == 1:
                    self._poll_group(due[0], now)
                elif due:
                    self._poll_many(due, now)
        self._maybe_cleanup(now)
        return self._sleep_time(max(now, self._clock()))

    def _poll_group(self, key: GroupingKey, now: float) -> None:
        registry = self._registry
        if not registry.mark_in_flight(key):
            return
        try:
            head = registry.head_of(key)
            if head is None:
                return
            self._count(rounds=1)
            taken: set[str] = set()
            ripe = registry.linger_next(key, (), now)
            had_messages, empty = self._drain(key, [head], now, taken, (ripe or [])[:1])
            self._record(key, had_messages, now, empty, taken)
        finally:
            registry.unmark_in_flight(key)

    def _drain(
        self,
        key: GroupingKey,
        first: Sequence[IntentionT],
        since: float,
        taken: set[str],
        partitions: Sequence[str] = (),
    ) -> tuple[bool, PopResult | None]:
        """Pop for the group's waiting intentions in FIFO order, a growing chunk at a time
        (``first``, then up to GROUP_CHUNK_MAX), until a pop comes back empty: a hot queue
        with thousands of idle waiters costs one small call per round, not one call
        carrying every waiter. Each chunk's delivered intentions leave the registry, so
        the next chunk starts where this one ended, and the rest stay registered. A
        lingering group (linger.py) pops only its ripe partitions, one poll each (the first
        chunk's from ``partitions``); the others wait until theirs are. ``taken`` collects
        the partitions delivered from.

        Returns whether anything was delivered and the empty result that ended the drain
        (its hints: ``wake_after``, only meaningful when nothing was delivered, and the
        due time)."""
        chunk: Sequence[IntentionT] = first
        delivered_any = False
        while chunk:
            try:
                results = self._popper.pop_group(chunk, partitions)
            except Exception:
                log.exception("poll worker %d: pop failed for group %s", self.index, key)
                self._count(errors=1)
                return delivered_any, None
            self._count(pops=len(results))
            delivered = [result for result in results if result.has_messages]
            for result in delivered:
                taken.update(result.partitions)
                self._deliver(result)
            delivered_any = delivered_any or bool(delivered)
            if len(delivered) < len(chunk) or self._stopping.is_set():
                # An empty pop: the group has nothing more now.
                return delivered_any, next((r for r in results if not r.has_messages), None)
            size = min(GROUP_CHUNK_MAX, 4 * len(chunk))
            ripe = self._registry.linger_next(key, taken, since)
            partitions = () if ripe is None else ripe[:size]
            if ripe is not None:
                size = len(partitions)
            chunk = self._registry.intentions_for(key, size) if size else []
        return delivered_any, None

    def _record(
        self,
        key: GroupingKey,
        had_messages: bool,
        now: float,
        empty: PopResult | None,
        taken: set[str],
    ) -> None:
        """Record a round's outcome with the hints of the empty result that ended it: its
        ``wake_after``, and its due time as the group's timer (a contended pop: the
        backoff's base interval, within which a concurrent lease has committed)."""
        if empty is None:
            self._registry.record_round(key, had_messages, now, taken=taken)
            return
        emptied = empty.partitions  # a pop of named partitions: only they are stale
        timer = None
        if empty.due_in is not None or empty.contended:
            back = self._clock()  # the due time counts from when the result came back
            if empty.due_in is not None:
                timer = back + max(0.0, empty.due_in)
            if empty.contended:
                retry = back + self._registry.policy.base_ms / 1000.0
                timer = retry if timer is None else min(timer, retry)
            self._count(timers=1)
        self._registry.record_round(key, had_messages, now, empty.wake_after, timer, taken, emptied)

    def _poll_many(self, keys: Sequence[GroupingKey], now: float) -> None:
        """Several due groups: pop for each group's head intention in one database call
        per HEAD_BATCH groups (idle groups cost one query per round, not one each); a
        group whose head got messages then pops for the rest of its intentions. With
        ``concurrent_checks`` N > 1 the heads are split into N roughly equal chunks (at
        most HEAD_BATCH each) popped for by up to N calls at once."""
        registry = self._registry
        marked = [key for key in keys if registry.mark_in_flight(key)]
        try:
            heads = [(key, registry.head_of(key)) for key in marked]
            groups = [(key, head) for key, head in heads if head is not None]
            if self._concurrent_checks == 1:
                for start in range(0, len(groups), HEAD_BATCH):
                    if self._stopping.is_set():
                        return
                    self._poll_heads(groups[start : start + HEAD_BATCH], now)
            else:
                self._poll_heads_concurrently(groups, now)
        finally:
            for key in marked:
                registry.unmark_in_flight(key)

    def _poll_heads_concurrently(
        self, groups: Sequence[tuple[GroupingKey, IntentionT]], now: float
    ) -> None:
        """Up to ``concurrent_checks`` :meth:`_poll_heads` calls at once, each on its own
        thread (a greenlet under gevent's patching), joined before returning."""
        n = self._concurrent_checks
        size = min(HEAD_BATCH, max(1, math.ceil(len(groups) / n)))
        chunks = [groups[start : start + size] for start in range(0, len(groups), size)]
        for wave in range(0, len(chunks), n):
            if self._stopping.is_set():
                return
            threads = [
                threading.Thread(
                    target=self._poll_heads_safely,
                    args=(chunk, now),
                    name=f"queen-poll-check-{self.index}",
                    daemon=True,
                )
                for chunk in chunks[wave : wave + n]
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

    def _poll_heads_safely(
        self, groups: Sequence[tuple[GroupingKey, IntentionT]], now: float
    ) -> None:
        """:meth:`_poll_heads` on a check thread: an error is logged, never lost."""
        try:
            self._poll_heads(groups, now)
        except Exception:
            log.exception("poll worker %d: check of %d groups failed", self.index, len(groups))
            self._count(errors=1)

    def _poll_heads(self, groups: Sequence[tuple[GroupingKey, IntentionT]], now: float) -> None:
        registry = self._registry
        self._count(rounds=len(groups))
        ripe = [registry.linger_next(key, (), now) for key, _ in groups]
        partitions = [r[0] if r else None for r in ripe]
        try:
            results = self._popper.pop_heads([head for _, head in groups], partitions)
        except Exception:
            log.exception("poll worker %d: pop failed for %d groups", self.index, len(groups))
            self._count(errors=1)
            for key, _ in groups:
                registry.record_round(key, False, now)
            return
        self._count(pops=len(results))
        for (key, _), result in zip(groups, results, strict=False):
            had_messages = result.has_messages
            empty: PopResult | None = result
            taken: set[str] = set()
            if had_messages:
                taken.update(result.partitions)
                self._deliver(result)
                next_ripe = registry.linger_next(key, taken, now)
                parts = () if next_ripe is None else next_ripe[:4]
                more = registry.intentions_for(key, 4 if next_ripe is None else len(parts))
                _, empty = self._drain(key, more, now, taken, parts)
            self._record(key, had_messages, now, empty, taken)

    def _deliver(self, result: PopResult) -> None:
        intention = self._registry.remove(result.request_id)
        if intention is not None and self._responses.post(
            intention.worker_id, result.request_id, result.status, result.body, result.lease_ids
        ):
            self._count(delivered=1)
            return
        # The client left or timed out meanwhile: hand the messages to the next consumer
        # now rather than after the lease time.
        self._release(result.lease_ids)

    def _release(self, lease_ids: Sequence[str]) -> None:
        if not lease_ids:
            return
        try:
            self._popper.release(list(lease_ids))
        except Exception:
            log.exception("poll worker %d: releasing leases %s failed", self.index, lease_ids)
            self._count(errors=1)
            return
        self._count(released_leases=len(lease_ids))

    def _count(
        self,
        *,
        rounds: int = 0,
        pops: int = 0,
        delivered: int = 0,
        timed_out: int = 0,
        released_leases: int = 0,
        errors: int = 0,
        timers: int = 0,
    ) -> None:
        """Add to the counters (under a lock: concurrent checks update them at once)."""
        with self._counter_lock:
            c = self.counters
            c.rounds += rounds
            c.pops += pops
            c.delivered += delivered
            c.timed_out += timed_out
            c.released_leases += released_leases
            c.errors += errors
            c.timers += timers

    def _maybe_cleanup(self, now: float) -> None:
        if self.index != 0:
            return
        if self._next_cleanup is None:
            self._next_cleanup = now + self._cleanup_every_s
        elif now >= self._next_cleanup:
            self._registry.cleanup_idle(self._cleanup_threshold_s, now)
            self._next_cleanup = now + self._cleanup_every_s

    def _checks_due(self, now: float) -> bool:
        """Whether this pass runs the due groups' rounds: always, or with ``due_on_ticks``
        after a wake-up or once a tick has passed."""
        if not self._due_on_ticks:
            return True
        woken, self._woken = self._woken, False
        if woken or self._next_tick is None or now >= self._next_tick:
            self._next_tick = now + self._interval_s
            return True
        return False

    def _sleep_time(self, now: float) -> float:
        timeout = self._interval_s
        if self._due_on_ticks:
            at_times = [self._next_tick, self._registry.next_deadline(self.index)]
        else:
            at_times = [
                self._registry.next_due(self.index),
                self._registry.next_deadline(self.index),
            ]
        for at in at_times:
            if at is not None:
                timeout = min(timeout, at - now)
        return max(0.0, timeout)


class PollWorkerPool(Generic[IntentionT]):
    """``count`` poll workers on daemon threads (greenlets under gevent's patching)."""

    def __init__(
        self,
        count: int,
        registry: PollIntentionRegistry[IntentionT],
        popper: Popper[IntentionT],
        responses: ResponseQueues,
        *,
        worker_interval_ms: int = 50,
        clock: Clock = time.monotonic,
        cleanup_threshold_s: float = 3600.0,
        name: str = "queen-poll",
        concurrent_checks: int = 1,
        due_on_ticks: bool = False,
    ) -> None:
        self.registry = registry
        self.responses = responses
        self.workers = [
            PollWorker(
                i,
                count,
                registry,
                popper,
                responses,
                worker_interval_ms=worker_interval_ms,
                clock=clock,
                cleanup_threshold_s=cleanup_threshold_s,
                concurrent_checks=concurrent_checks,
                due_on_ticks=due_on_ticks,
            )
            for i in range(count)
        ]
        self._name = name
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start one daemon thread per worker (once)."""
        if self._threads:
            raise RuntimeError("poll worker pool already started")
        for worker in self.workers:
            thread = threading.Thread(
                target=worker.run, name=f"{self._name}-{worker.index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def wake(self, shards: Iterable[int], source: str = "push") -> None:
        """Wake the workers owning ``shards``."""
        for shard in set(shards):
            self.workers[shard].wake(source)

    def wake_all(self, source: str = "notify") -> None:
        """Wake every worker."""
        self.wake(range(len(self.workers)), source)

    def notify(
        self,
        queue: str,
        partition: str | None = None,
        group: str | None = None,
        *,
        namespace: str | None = None,
        task: str | None = None,
        source: str = "push",
        at: float | None = None,
        count: int = 1,
    ) -> set[int]:
        """Messages may be available: reset matching groups' backoff and wake their owners.

        Call on push (``group`` None), on an ack that frees a partition (``group`` set),
        and for LISTEN/NOTIFY and peer notifications. ``at``, the push's wall-clock time
        when known, lets groups with a later wake hint sleep on (see
        :meth:`PollIntentionRegistry.reset_matching`). ``count``: how many messages the push
        stored there (linger's hints). Returns the shards woken.
        """
        shards = self.registry.reset_matching(
            queue, partition, group, namespace=namespace, task=task, at=at, count=count
        )
        self.wake(shards, source)
        return shards

    def stop(self, timeout: float = 1.0) -> bool:
        """Shut down: refuse new intentions, answer every waiting one with 204, stop the
        workers. Returns True if every thread ended within ``timeout`` seconds."""
        self.registry.close()
        for intention in self.registry.drain():
            self.responses.post(intention.worker_id, intention.request_id, 204, None, ())
        for worker in self.workers:
            worker.request_stop()
        end = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, end - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def stats(self) -> dict[str, object]:
        """Registry counts plus summed and per-worker counters."""
        per_worker = [asdict(worker.counters) for worker in self.workers]
        totals: dict[str, object] = {}
        for name in (
            "rounds",
            "pops",
            "delivered",
            "timed_out",
            "released_leases",
            "errors",
            "timers",
        ):
            totals[name] = sum(int(counters[name]) for counters in per_worker)
        wakeups: dict[str, int] = {}
        for counters in per_worker:
            for source, n in counters["wakeups"].items():
                wakeups[source] = wakeups.get(source, 0) + n
        totals["wakeups"] = wakeups
        return {"registry": asdict(self.registry.stats()), "totals": totals, "workers": per_worker}
