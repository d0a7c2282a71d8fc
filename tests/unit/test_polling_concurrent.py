"""PollWorker ``concurrent_checks``: the due groups' head pops as up to N calls at once.

Synchronisation is by events and semaphores with generous timeouts, never by sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from queen_threads.polling import (
    PollIntentionRegistry,
    PollWorker,
    PollWorkerPool,
    PopResult,
    ResponseQueues,
)
from queen_threads.polling.clock import ManualClock
from queen_threads.polling.worker import HEAD_BATCH
from queen_threads.queue.intention import PollIntention
from tests.support.keys import qk
from tests.support.polling_fakes import make_intention

WAIT_S = 10.0


class GatePopper:
    """Empty head pops that, when ``gate`` is given, block until it opens; counts the
    callers inside at once and records each call's size and thread."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.entered = threading.Semaphore(0)
        self.active = 0
        self.peak = 0
        self.sizes: list[int] = []
        self.threads: set[threading.Thread] = set()
        self._lock = threading.Lock()

    def pop_heads(
        self, intentions: Sequence[PollIntention], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.sizes.append(len(intentions))
            self.threads.add(threading.current_thread())
        self.entered.release()
        try:
            if self.gate is not None:
                assert self.gate.wait(WAIT_S), "the test never opened the gate"
            return [PopResult(it.request_id, 204, None) for it in intentions]
        finally:
            with self._lock:
                self.active -= 1

    def pop_group(
        self, intentions: Sequence[PollIntention], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        return self.pop_heads(intentions[:1])

    def release(self, lease_ids: Sequence[str]) -> None:
        pass


def worker_with_groups(
    popper: GatePopper, groups: int, concurrent_checks: int
) -> tuple[PollWorker[PollIntention], PollIntentionRegistry[PollIntention]]:
    clock = ManualClock(0.0)
    registry = PollIntentionRegistry[PollIntention](
        capacity=groups + 1, worker_count=1, clock=clock
    )
    for i in range(groups):
        registry.register(make_intention(f"r{i}", queue=f"q{i}"))
    worker = PollWorker(
        0, 1, registry, popper, ResponseQueues(), clock=clock, concurrent_checks=concurrent_checks
    )
    return worker, registry


def test_n_concurrent_checks_run_n_calls_at_once() -> None:
    gate = threading.Event()
    popper = GatePopper(gate)
    worker, registry = worker_with_groups(popper, groups=6, concurrent_checks=3)
    passing = threading.Thread(target=worker.run_once, args=(0.0,), daemon=True)
    passing.start()
    try:
        for _ in range(3):
            assert popper.entered.acquire(timeout=WAIT_S), "fewer than 3 calls started"
        assert popper.active == 3, "all three calls are inside the database at once"
    finally:
        gate.set()
        passing.join(WAIT_S)
    assert not passing.is_alive()
    assert popper.peak == 3 and sorted(popper.sizes) == [2, 2, 2]
    assert worker.counters.rounds == 6 and worker.counters.pops == 6
    assert registry.stats().in_flight == 0
    assert not any(registry.is_due(qk(f"q{i}:*:__QUEUE_MODE__"), 0.01) for i in range(6))
    assert registry.is_due(qk("q0:*:__QUEUE_MODE__"), 0.2)  # each recorded its empty round


def test_one_check_at_a_time_runs_on_the_worker_itself() -> None:
    popper = GatePopper()
    worker, _ = worker_with_groups(popper, groups=HEAD_BATCH + 1, concurrent_checks=1)
    worker.run_once(0.0)
    assert popper.sizes == [HEAD_BATCH, 1]
    assert popper.peak == 1 and popper.threads == {threading.current_thread()}


def test_chunks_are_even_at_most_a_head_batch_and_run_n_at_a_time() -> None:
    popper = GatePopper()
    worker, _ = worker_with_groups(popper, groups=2 * HEAD_BATCH + 50, concurrent_checks=2)
    worker.run_once(0.0)
    assert sorted(popper.sizes) == [50, HEAD_BATCH, HEAD_BATCH]
    assert popper.peak <= 2 and threading.current_thread() not in popper.threads
    assert worker.counters.rounds == 2 * HEAD_BATCH + 50


def test_fewer_groups_than_checks_make_one_call_per_group() -> None:
    popper = GatePopper()
    worker, _ = worker_with_groups(popper, groups=2, concurrent_checks=4)
    worker.run_once(0.0)
    assert popper.sizes == [1, 1]


def test_concurrent_checks_must_be_at_least_one() -> None:
    registry = PollIntentionRegistry[PollIntention](worker_count=1)
    with pytest.raises(ValueError, match="concurrent checks"):
        PollWorker(0, 1, registry, GatePopper(), ResponseQueues(), concurrent_checks=0)
    with pytest.raises(ValueError, match="concurrent checks"):
        PollWorkerPool(1, registry, GatePopper(), ResponseQueues(), concurrent_checks=0)
    pool = PollWorkerPool(1, registry, GatePopper(), ResponseQueues(), concurrent_checks=3)
    assert pool.workers[0]._concurrent_checks == 3
