"""Due times: an empty pop that says when something becomes available (a lease runs out,
a retry's wait ends, ...) makes its group due at that time, whatever its backoff, so the
waiters are offered the message then rather than at their next backoff poll."""

from __future__ import annotations

from typing import Any

import pytest

from queen_threads.polling import BackoffPolicy, PollIntentionRegistry, PollWorker, ResponseQueues
from queen_threads.polling.clock import ManualClock
from queen_threads.queue.polling import PollingService
from queen_threads.settings import load_settings
from tests.support.keys import qk
from tests.support.polling_fakes import InMemoryPopper, make_intention

KEY = qk("q:*:g")
OTHER = qk("r:*:g")
# Long backoff steps, so that a round at a due time cannot be mistaken for a backoff round.
POLICY = BackoffPolicy(base_ms=1000, threshold=1, multiplier=2.0, max_ms=8000)


class Harness:
    def __init__(self) -> None:
        self.clock = ManualClock(0.0)
        self.registry = PollIntentionRegistry(worker_count=1, policy=POLICY, clock=self.clock)
        self.popper = InMemoryPopper()
        self.responses = ResponseQueues()
        self.queue = self.responses.queue_for(0)
        self.worker = PollWorker(0, 1, self.registry, self.popper, self.responses, clock=self.clock)

    def wait(self, rid: str, queue: str = "q") -> None:
        self.queue.open(rid)
        self.registry.register(make_intention(rid, queue=queue, consumer_group="g", timeout_s=60.0))

    def at(self, now: float) -> float:
        """One pass at ``now``; the seconds the worker would sleep."""
        self.clock.now = now
        return self.worker.run_once()

    def pops(self) -> int:
        return len(self.popper.calls)


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_an_empty_pop_with_a_due_time_makes_the_group_due_then(h: Harness) -> None:
    h.popper.due_in[KEY] = 0.35
    h.wait("r1")
    h.at(0.0)
    assert h.pops() == 1
    assert h.worker.counters.timers == 1
    assert h.registry.next_due(0) == pytest.approx(0.35)
    assert h.at(0.2) == pytest.approx(0.05)  # sleeps until the due time (worker interval 50 ms)
    assert h.pops() == 1
    h.popper.due_in.clear()
    h.popper.add(KEY, 1)
    assert h.at(0.349) == pytest.approx(0.001)
    assert h.pops() == 1
    h.at(0.35)
    assert h.pops() == 2, "popped at the due time, not after the 1 s backoff"
    assert h.queue.wait("r1", 0) is not None


def test_the_due_time_counts_from_when_the_result_came_back(h: Harness) -> None:
    h.popper.due_in[KEY] = 0.3
    h.popper.on_pop = lambda _: h.clock.advance(0.02)  # the call took 20 ms
    h.wait("r1")
    h.at(0.0)
    assert h.registry.next_due(0) == pytest.approx(0.32)


def test_a_due_time_later_than_the_backoff_leaves_the_backoff_in_charge(h: Harness) -> None:
    h.popper.due_in[KEY] = 30.0
    h.wait("r1")
    h.at(0.0)
    assert h.registry.next_due(0) == pytest.approx(2.0)  # 1 s base, doubled after the empty round


def test_every_round_computes_the_due_time_anew(h: Harness) -> None:
    h.popper.due_in[KEY] = 0.5
    h.wait("r1")
    h.at(0.0)
    h.popper.due_in[KEY] = 0.25  # e.g. a lease was given up, a shorter retry came
    h.at(0.5)
    assert h.pops() == 2
    assert h.registry.next_due(0) == pytest.approx(0.75)
    del h.popper.due_in[KEY]  # nothing due any more: the backoff again
    h.at(0.75)
    assert h.registry.next_due(0) == pytest.approx(0.75 + 8.0)


def test_a_wake_up_clears_the_timer_and_a_poked_round_keeps_none(h: Harness) -> None:
    h.popper.due_in[KEY] = 5.0
    h.wait("r1")
    h.at(0.0)
    assert h.registry.next_due(0) == pytest.approx(2.0)
    h.registry.reset_matching("q")
    assert h.registry.next_due(0) == float("-inf")
    # A push during the round: the round's due time may predate it, so the group is due at
    # once instead.
    h.popper.on_pop = lambda _: h.registry.reset_matching("q")
    h.popper.due_in[KEY] = 0.5
    h.at(0.1)
    assert h.registry.backoff_state(KEY).timer is None  # type: ignore[union-attr]
    assert h.registry.next_due(0) == float("-inf")


def test_a_contended_pop_looks_again_after_the_base_interval(h: Harness) -> None:
    h.popper.contended.add(KEY)
    h.wait("r1")
    for _ in range(3):  # the backoff grows to 8 s meanwhile
        h.popper.contended.discard(KEY)
        h.at(h.clock.now + 10.0)
    h.popper.contended.add(KEY)
    start = h.clock.now + 10.0
    h.at(start)
    assert h.registry.next_due(0) == pytest.approx(start + 1.0)
    h.popper.due_in[KEY] = 0.2  # and a due time that comes sooner wins
    h.at(start + 1.0)
    assert h.registry.next_due(0) == pytest.approx(start + 1.2)


def test_several_groups_in_one_call_each_get_their_own_due_time(h: Harness) -> None:
    h.popper.due_in[KEY] = 0.4
    h.popper.due_in[OTHER] = 0.7
    h.wait("r1", "q")
    h.wait("r2", "r")
    h.at(0.0)
    assert h.popper.calls == [["r1", "r2"]]  # the heads' call
    assert h.registry.backoff_state(KEY).timer == pytest.approx(0.4)  # type: ignore[union-attr]
    assert h.registry.backoff_state(OTHER).timer == pytest.approx(0.7)  # type: ignore[union-attr]


def test_a_round_that_delivered_keeps_the_due_time_of_its_last_empty_pop(h: Harness) -> None:
    h.popper.add(KEY, 1)
    h.popper.due_in[KEY] = 0.05
    h.wait("r1")
    h.wait("r2")
    h.at(0.0)  # r1 gets the message, r2's pop comes back empty with a due time
    assert h.queue.wait("r1", 0) is not None
    assert h.registry.next_due(0) == pytest.approx(0.05)


class Notified:
    """Stands in for PollWorkerPool.notify."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str | None, str]] = []

    def __call__(
        self,
        queue: str,
        partition: str | None = None,
        group: str | None = None,
        *,
        namespace: str | None = None,
        task: str | None = None,
        source: str = "push",
        count: int = 1,
    ) -> set[int]:
        self.calls.append((queue, partition, group, source))
        return set()


@pytest.mark.parametrize("delay", [None, 0, 300, "100", True])
def test_a_freed_partition_wakes_its_groups_at_once_even_with_a_retry_wait(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, delay: Any
) -> None:
    """Woken now, the group's pop finds nothing yet and says when the retry is due (by
    the database's clock): the timer does the rest, so no delayed wake-up is kept."""
    settings = load_settings({"FILE_BUFFER_DIR": str(tmp_path)}, dotenv_path=None)
    service = PollingService(settings, store=None, worker_id=1)  # type: ignore[arg-type]
    notified = Notified()
    monkeypatch.setattr(service.pool, "notify", notified)
    service.on_event({"kind": "free", "queue": "q", "partition": "P", "consumerGroup": "g",
                      "delayMs": delay})  # fmt: skip
    assert notified.calls == [("q", "P", "g", "notify")]
