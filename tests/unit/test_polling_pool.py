"""PollWorkerPool on real threads: wake-ups interrupt the sleep, shutdown answers everyone.

Synchronisation is by events with generous timeouts, never by sleeping. The worker
interval and the backoff base are an hour, so within a test's time a worker that has gone
to sleep only runs again when something wakes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from queen_threads.polling import (
    BackoffPolicy,
    PollIntentionRegistry,
    PollWorkerPool,
    ResponseQueues,
    shard_of,
)
from queen_threads.queue.intention import PollIntention
from tests.support.keys import qk
from tests.support.polling_fakes import InMemoryPopper, make_intention

WAIT_S = 10.0
HOUR_MS = 3_600_000
# Two queues whose groups belong to the same poll worker.
SAME_SHARD = [
    n for n in (f"q{i}" for i in range(50)) if shard_of(qk(f"{n}:*:__QUEUE_MODE__"), 2) == 0
]
QUEUE, WARM = SAME_SHARD[0], SAME_SHARD[1]


class Fixture:
    def __init__(self) -> None:
        policy = BackoffPolicy(base_ms=HOUR_MS, max_ms=HOUR_MS)
        self.registry = PollIntentionRegistry(policy=policy, worker_count=2)
        self.popper = InMemoryPopper()
        self.popped: list[str] = []
        self.pop_event = threading.Event()
        self.popper.on_pop = self._on_pop
        self.responses = ResponseQueues()
        self.queue = self.responses.queue_for(7)
        self.pool = PollWorkerPool(
            2, self.registry, self.popper, self.responses, worker_interval_ms=HOUR_MS
        )

    def _on_pop(self, intentions: Sequence[PollIntention]) -> None:
        self.popped.extend(it.request_id for it in intentions)
        self.pop_event.set()

    def register(self, rid: str, queue: str = QUEUE) -> int:
        self.queue.open(rid)
        intention = make_intention(rid, worker_id=7, queue=queue, created_at=time.monotonic())
        return self.registry.register(intention)

    def put_worker_to_sleep(self) -> None:
        """Have worker 0 run an empty round on another group; it then sleeps ~30 s."""
        self.pool.wake([self.register("warm-up", queue=WARM)], "register")
        assert self.pop_event.wait(WAIT_S)
        self.pop_event.clear()


@pytest.fixture
def f() -> Iterator[Fixture]:
    fixture = Fixture()
    fixture.pool.start()
    yield fixture
    fixture.pool.stop(timeout=WAIT_S)


def test_register_wakes_the_owner_at_once(f: Fixture) -> None:
    f.put_worker_to_sleep()
    f.popper.add(qk(f"{QUEUE}:*:__QUEUE_MODE__"), 1)
    shard = f.register("r1")
    f.pool.wake([shard], "register")
    response = f.queue.wait("r1", WAIT_S)
    assert response is not None and response.status == 200
    assert f.pool.workers[0].counters.wakeups["register"] == 2


def test_push_wakes_a_backed_off_group(f: Fixture) -> None:
    f.pool.wake([f.register("r1")], "register")
    assert f.pop_event.wait(WAIT_S)  # the first, empty, round; next one in an hour
    # Push: messages appear, matching groups are reset and their workers woken.
    f.popper.add(qk(f"{QUEUE}:*:__QUEUE_MODE__"), 1)
    assert f.pool.notify(QUEUE, "Default", source="push") == {0}
    response = f.queue.wait("r1", WAIT_S)
    assert response is not None and response.status == 200
    assert f.popped == ["r1", "r1"]


def test_stop_answers_waiting_requests_and_refuses_new_ones() -> None:
    fixture = Fixture()
    fixture.pool.start()
    fixture.register("r1")
    fixture.register("r2", queue="other")
    assert fixture.pool.stop(timeout=WAIT_S)
    for rid in ("r1", "r2"):
        response = fixture.queue.wait(rid, 0)
        assert response is not None and response.status == 204
    assert fixture.registry.closed


def test_stats_sum_the_workers(f: Fixture) -> None:
    f.popper.add(qk(f"{QUEUE}:*:__QUEUE_MODE__"), 1)
    f.pool.wake([f.register("r1")], "register")
    assert f.queue.wait("r1", WAIT_S) is not None
    stats = f.pool.stats()
    totals = stats["totals"]
    assert isinstance(totals, dict)
    assert totals["delivered"] == 1
    assert totals["wakeups"]["register"] == 1


def test_wake_all_and_double_start(f: Fixture) -> None:
    f.pool.wake_all("notify")
    assert all(w.counters.wakeups["notify"] == 1 for w in f.pool.workers)
    with pytest.raises(RuntimeError):
        f.pool.start()
