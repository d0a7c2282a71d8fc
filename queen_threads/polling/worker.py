"""Poll workers: the loops that answer waiting long polls, and the pool running them."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from .clock import Clock
from .intention import GroupKey, PollIntention
from .popper import Popper, PopResult
from .registry import PollIntentionRegistry
from .responses import ResponseQueues

log = logging.getLogger("queen_threads.polling")

HEAD_BATCH = 200
"""Groups whose head intentions are popped in one database call."""

GROUP_CHUNK_MAX = 64
"""Most intentions of one group popped for in one database call."""

WAKE_SOURCES = ("register", "push", "notify", "peer", "retry")
"""Why a worker was woken: a new intention, a local push/ack, a LISTEN/NOTIFY, a peer, the
end of a scheduled retry's wait."""


@dataclass(slots=True)
class WorkerCounters:
    """Monotonic counters of one poll worker."""

    rounds: int = 0
    pops: int = 0
    delivered: int = 0
    timed_out: int = 0
    released_leases: int = 0
    errors: int = 0
    wakeups: dict[str, int] = field(default_factory=lambda: dict.fromkeys(WAKE_SOURCES, 0))


class PollWorker:
    """One poll worker; owns the groups whose key hashes to ``index``.

    :meth:`run_once` does one pass: answer expired intentions with 204, run one pop
    round for each due group, and return how long to sleep. :meth:`run` loops on it,
    sleeping on a wake event so that a registration or a push interrupts the sleep.
    """

    def __init__(
        self,
        index: int,
        count: int,
        registry: PollIntentionRegistry,
        popper: Popper,
        responses: ResponseQueues,
        *,
        worker_interval_ms: int = 50,
        clock: Clock = time.monotonic,
        cleanup_threshold_s: float = 3600.0,
        cleanup_every_s: float = 60.0,
    ) -> None:
        if not 0 <= index < count:
            raise ValueError(f"worker index {index} out of range for {count} workers")
        if count != registry.worker_count:
            raise ValueError(f"{count} workers but the registry has {registry.worker_count}")
        if worker_interval_ms < 1:
            raise ValueError(f"worker interval must be >= 1 ms, got {worker_interval_ms}")
        self.index = index
        self.count = count
        self.counters = WorkerCounters()
        self._registry = registry
        self._popper = popper
        self._responses = responses
        self._interval_s = worker_interval_ms / 1000.0
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
                self.counters.errors += 1
                timeout = self._interval_s
            if timeout > 0:
                self._wake.wait(timeout)

    def run_once(self, now: float | None = None) -> float:
        """One pass at ``now`` (default: the clock); returns the seconds to sleep."""
        if now is None:
            now = self._clock()
        for intention in self._registry.pop_expired(self.index, now):
            self._responses.post(intention.worker_id, intention.request_id, 204, None, ())
            self.counters.timed_out += 1
        due = self._registry.due_keys(self.index, now)
        if len(due) == 1:
            self._poll_group(due[0], now)
        elif due:
            self._poll_many(due, now)
        self._maybe_cleanup(now)
        return self._sleep_time(max(now, self._clock()))

    def _poll_group(self, key: GroupKey, now: float) -> None:
        registry = self._registry
        if not registry.mark_in_flight(key):
            return
        try:
            head = registry.head_of(key)
            if head is None:
                return
            self.counters.rounds += 1
            had_messages = self._drain(key, [head])
            registry.record_round(key, had_messages, now)
        finally:
            registry.unmark_in_flight(key)

    def _drain(self, key: GroupKey, first: Sequence[PollIntention]) -> bool:
        """Pop for the group's waiting intentions in FIFO order, a growing chunk at a time
        (``first``, then up to GROUP_CHUNK_MAX), until a pop comes back empty: a hot queue
        with thousands of idle waiters costs one small call per round, not one call
        carrying every waiter. Each chunk's delivered intentions leave the registry, so
        the next chunk starts where this one ended. True if anything was delivered."""
        chunk: Sequence[PollIntention] = first
        delivered_any = False
        while chunk:
            try:
                results = self._popper.pop_group(chunk)
            except Exception:
                log.exception("poll worker %d: pop failed for group %s", self.index, key)
                self.counters.errors += 1
                return delivered_any
            self.counters.pops += len(results)
            delivered = [result for result in results if result.has_messages]
            for result in delivered:
                self._deliver(result)
            delivered_any = delivered_any or bool(delivered)
            if len(delivered) < len(chunk) or self._stopping.is_set():
                return delivered_any  # an empty pop: the group has nothing more now
            chunk = self._registry.intentions_for(key, min(GROUP_CHUNK_MAX, 4 * len(chunk)))
        return delivered_any

    def _poll_many(self, keys: Sequence[GroupKey], now: float) -> None:
        """Several due groups: pop for each group's head intention in one database call
        per HEAD_BATCH groups (idle groups cost one query per round, not one each); a
        group whose head got messages then pops for the rest of its intentions."""
        registry = self._registry
        marked = [key for key in keys if registry.mark_in_flight(key)]
        try:
            heads = [(key, registry.head_of(key)) for key in marked]
            groups = [(key, head) for key, head in heads if head is not None]
            for start in range(0, len(groups), HEAD_BATCH):
                if self._stopping.is_set():
                    return
                self._poll_heads(groups[start : start + HEAD_BATCH], now)
        finally:
            for key in marked:
                registry.unmark_in_flight(key)

    def _poll_heads(self, groups: Sequence[tuple[GroupKey, PollIntention]], now: float) -> None:
        registry = self._registry
        self.counters.rounds += len(groups)
        try:
            results = self._popper.pop_heads([head for _, head in groups])
        except Exception:
            log.exception("poll worker %d: pop failed for %d groups", self.index, len(groups))
            self.counters.errors += 1
            for key, _ in groups:
                registry.record_round(key, False, now)
            return
        self.counters.pops += len(results)
        for (key, _), result in zip(groups, results, strict=False):
            had_messages = result.has_messages
            if had_messages:
                self._deliver(result)
                self._drain(key, registry.intentions_for(key, 4))
            registry.record_round(key, had_messages, now)

    def _deliver(self, result: PopResult) -> None:
        intention = self._registry.remove(result.request_id)
        if intention is not None and self._responses.post(
            intention.worker_id, result.request_id, result.status, result.body, result.lease_ids
        ):
            self.counters.delivered += 1
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
            self.counters.errors += 1
            return
        self.counters.released_leases += len(lease_ids)

    def _maybe_cleanup(self, now: float) -> None:
        if self.index != 0:
            return
        if self._next_cleanup is None:
            self._next_cleanup = now + self._cleanup_every_s
        elif now >= self._next_cleanup:
            self._registry.cleanup_idle(self._cleanup_threshold_s, now)
            self._next_cleanup = now + self._cleanup_every_s

    def _sleep_time(self, now: float) -> float:
        timeout = self._interval_s
        for at in (self._registry.next_due(self.index), self._registry.next_deadline(self.index)):
            if at is not None:
                timeout = min(timeout, at - now)
        return max(0.0, timeout)


class PollWorkerPool:
    """``count`` poll workers on daemon threads (greenlets under gevent's patching)."""

    def __init__(
        self,
        count: int,
        registry: PollIntentionRegistry,
        popper: Popper,
        responses: ResponseQueues,
        *,
        worker_interval_ms: int = 50,
        clock: Clock = time.monotonic,
        cleanup_threshold_s: float = 3600.0,
        name: str = "queen-poll",
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
    ) -> set[int]:
        """Messages may be available: reset matching groups' backoff and wake their owners.

        Call on push (``group`` None), on an ack that frees a partition (``group`` set),
        and for LISTEN/NOTIFY and peer notifications. Returns the shards woken.
        """
        shards = self.registry.reset_matching(
            queue, partition, group, namespace=namespace, task=task
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
        for name in ("rounds", "pops", "delivered", "timed_out", "released_leases", "errors"):
            totals[name] = sum(int(counters[name]) for counters in per_worker)
        wakeups: dict[str, int] = {}
        for counters in per_worker:
            for source, n in counters["wakeups"].items():
                wakeups[source] = wakeups.get(source, 0) + n
        totals["wakeups"] = wakeups
        return {"registry": asdict(self.registry.stats()), "totals": totals, "workers": per_worker}
