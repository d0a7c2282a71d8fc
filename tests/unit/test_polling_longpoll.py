"""LongPollService: every request gets one answer, and no lease outlives its client."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

import pytest

from queen_threads.polling import (
    NO_CONTENT,
    LongPollService,
    PollIntentionRegistry,
    PollWorker,
    RegistryFull,
    Response,
    ResponseQueues,
)
from queen_threads.polling.clock import ManualClock
from tests.support.keys import qk
from tests.support.polling_fakes import InMemoryPopper, make_intention

KEY = qk("q:*:__QUEUE_MODE__")


class FakeWaker:
    """Records wake-ups and runs ``on_wake`` synchronously (e.g. a worker pass)."""

    def __init__(self) -> None:
        self.woken: list[tuple[int, ...]] = []
        self.on_wake: Callable[[], object] | None = None

    def wake(self, shards: Iterable[int], source: str = "push") -> None:
        self.woken.append(tuple(shards))
        if self.on_wake is not None:
            self.on_wake()


class Setup:
    def __init__(self, capacity: int = 10) -> None:
        self.clock = ManualClock(100.0)
        self.registry = PollIntentionRegistry(capacity=capacity, worker_count=1, clock=self.clock)
        self.popper = InMemoryPopper()
        self.responses = ResponseQueues()
        self.waker = FakeWaker()
        self.worker = PollWorker(0, 1, self.registry, self.popper, self.responses, clock=self.clock)
        self.service = LongPollService(
            self.registry,
            self.waker,
            self.responses,
            self.popper,
            clock=self.clock,
            grace_s=1.0,
            check_every_s=0.001,
        )


@pytest.fixture
def s() -> Setup:
    return Setup()


def test_registration_wakes_and_the_worker_answers(s: Setup) -> None:
    s.popper.add(KEY, 1)
    s.waker.on_wake = lambda: s.worker.run_once()
    response = s.service.wait_for(make_intention("r1", queue="q", created_at=100.0))
    assert response is not None and response.status == 200
    assert s.waker.woken == [(0,)]
    assert s.registry.size() == 0 and len(s.responses.queue_for(0)) == 0


def test_full_registry_raises_and_leaves_no_slot() -> None:
    s = Setup(capacity=1)
    s.registry.register(make_intention("other", queue="q", created_at=100.0, timeout_s=30))
    with pytest.raises(RegistryFull):
        s.service.wait_for(make_intention("r1", queue="q", created_at=100.0))
    assert len(s.responses.queue_for(0)) == 0
    assert s.waker.woken == []


def test_unanswered_after_deadline_and_grace_answers_204_itself(s: Setup) -> None:
    # Deadline and grace already behind us: the worker is stuck, the request answers.
    intention = make_intention("r1", queue="q", created_at=90.0, timeout_s=5.0)
    assert s.service.wait_for(intention) == NO_CONTENT
    assert s.registry.size() == 0 and len(s.responses.queue_for(0)) == 0


def test_answer_posted_at_the_last_moment_is_still_delivered(s: Setup) -> None:
    def worker_answers() -> None:
        claimed = s.registry.remove("r1")
        assert claimed is not None
        s.responses.post(0, "r1", 200, b"m", ["lease-9"])

    s.waker.on_wake = worker_answers
    intention = make_intention("r1", queue="q", created_at=90.0, timeout_s=5.0)
    assert s.service.wait_for(intention) == Response(200, b"m", ("lease-9",))
    assert s.popper.released == []


def test_disconnect_withdraws_the_intention(s: Setup) -> None:
    response = s.service.wait_for(
        make_intention("r1", queue="q", created_at=100.0), is_disconnected=lambda: True
    )
    assert response is None
    assert s.registry.size() == 0 and len(s.responses.queue_for(0)) == 0


def test_disconnect_releases_a_lease_taken_meanwhile(s: Setup) -> None:
    def gone_after_a_delivery() -> bool:
        s.registry.remove("r1")
        s.responses.post(0, "r1", 200, b"m", ["lease-1"])
        return True

    response = s.service.wait_for(
        make_intention("r1", queue="q", created_at=100.0), is_disconnected=gone_after_a_delivery
    )
    assert response is None
    assert s.popper.released == ["lease-1"]


def test_release_after_a_failed_write(s: Setup) -> None:
    s.service.release(("lease-1", "lease-2"))
    s.service.release(())
    assert s.popper.released == ["lease-1", "lease-2"]


def test_watch_nudge_triggers_the_disconnect_check_at_once() -> None:
    registry = PollIntentionRegistry(worker_count=1)
    responses = ResponseQueues()
    popper = InMemoryPopper()
    service = LongPollService(
        registry,
        FakeWaker(),
        responses,
        popper,
        check_every_s=60.0,  # no periodic check
    )
    nudges: list[Callable[[], None]] = []
    cancelled = threading.Event()
    gone = threading.Event()

    def watch(nudge: Callable[[], None]) -> Callable[[], None]:
        nudges.append(nudge)
        return cancelled.set

    now = time.monotonic()
    intention = make_intention("r1", queue="q", created_at=now, timeout_s=30.0)
    result: list[Response | None] = []
    waiter = threading.Thread(
        target=lambda: result.append(service.wait_for(intention, gone.is_set, watch))
    )
    waiter.start()
    while not nudges:
        time.sleep(0.001)
    nudges[0]()  # readable but still connected (e.g. pipelined data): keep waiting
    waiter.join(0.05)
    assert waiter.is_alive()
    gone.set()
    nudges[0]()
    waiter.join(2)
    assert result == [None], "answered as disconnected within the nudge, not after 60 s"
    assert registry.size() == 0
    assert cancelled.is_set()


def test_interrupt_wakes_a_waiter_once_without_an_answer() -> None:
    queue = ResponseQueues().queue_for(0)
    queue.open("r")
    queue.interrupt("r")
    assert queue.wait("r", 0) is None
    started = time.monotonic()
    assert queue.wait("r", 0.05) is None
    assert time.monotonic() - started >= 0.04, "the interrupt was one-shot"
    assert queue.post("r", 204, None, ())
    assert queue.wait("r", 0) == Response(204, None, ())


@pytest.mark.parametrize(("watched", "expect_checks"), [(True, False), (False, True)])
def test_a_watched_waiter_does_not_wake_before_its_deadline(
    watched: bool, expect_checks: bool
) -> None:
    service = LongPollService(
        PollIntentionRegistry(worker_count=1),
        FakeWaker(),
        ResponseQueues(),
        InMemoryPopper(),
        grace_s=0.05,
        check_every_s=0.01,
    )
    checks: list[float] = []

    def is_disconnected() -> bool:
        checks.append(time.monotonic())
        return False

    def watch(nudge: Callable[[], None]) -> Callable[[], None]:
        return lambda: None  # never nudged: the client stays

    intention = make_intention("r1", queue="q", created_at=time.monotonic(), timeout_s=0.3)
    # no poll worker runs: the waiter answers 204 itself after deadline + grace
    answer = service.wait_for(intention, is_disconnected, watch if watched else None)
    assert answer == NO_CONTENT
    assert bool(checks) is expect_checks, f"{len(checks)} periodic checks"
