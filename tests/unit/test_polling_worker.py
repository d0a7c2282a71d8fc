"""PollWorker.run_once, driven by hand with a manual clock and an in-memory popper."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from queen_threads.polling import (
    PollIntentionRegistry,
    PollWorker,
    Response,
    ResponseQueues,
    shard_of,
)
from queen_threads.polling.clock import ManualClock
from queen_threads.polling.worker import GROUP_CHUNK_MAX
from tests.support.keys import qk
from tests.support.polling_fakes import InMemoryPopper, make_intention

KEY = qk("q:*:g")


class Harness:
    """One registry, one worker (worker_count 1 unless given), one response queue."""

    def __init__(self, workers: int = 1, interval_ms: int = 50, due_on_ticks: bool = False) -> None:
        self.clock = ManualClock(0.0)
        self.registry = PollIntentionRegistry(worker_count=workers, clock=self.clock)
        self.popper = InMemoryPopper()
        self.responses = ResponseQueues()
        self.queue = self.responses.queue_for(0)
        self.workers = [
            PollWorker(
                i,
                workers,
                self.registry,
                self.popper,
                self.responses,
                worker_interval_ms=interval_ms,
                clock=self.clock,
                due_on_ticks=due_on_ticks,
            )
            for i in range(workers)
        ]
        self.worker = self.workers[0]

    def wait(self, rid: str, timeout_s: float = 30.0, **fields: Any) -> int:
        self.queue.open(rid)
        fields.setdefault("queue", "q")
        fields.setdefault("consumer_group", "g")
        intention = make_intention(rid, created_at=self.clock.now, timeout_s=timeout_s, **fields)
        return self.registry.register(intention)

    def answer(self, rid: str) -> Response | None:
        return self.queue.wait(rid, 0)


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_expiry_answers_204_only_after_the_deadline(h: Harness) -> None:
    h.wait("r1", timeout_s=2.0)
    h.popper.available[KEY] = 0
    h.worker.run_once(0.0)
    h.worker.run_once(1.999)
    assert h.answer("r1") is None
    h.worker.run_once(2.0)
    assert h.answer("r1") == Response(204, None, ())
    assert h.worker.counters.timed_out == 1
    assert h.registry.size() == 0


def test_delivery_answers_200_and_removes_the_intention(h: Harness) -> None:
    h.popper.add(KEY, 3)
    h.wait("r1", batch=2)
    h.worker.run_once(0.0)
    response = h.answer("r1")
    assert response is not None and response.status == 200
    assert response.lease_ids == ("lease-1",)
    assert h.registry.size() == 0
    assert (h.worker.counters.rounds, h.worker.counters.pops) == (1, 1)
    assert h.worker.counters.delivered == 1


def test_fifo_order_and_stop_at_first_empty(h: Harness) -> None:
    for rid in ["r1", "r2", "r3", "r4"]:
        h.wait(rid)
    h.popper.add(KEY, 2)
    h.worker.run_once(0.0)
    # The head first; it got a message, so a larger chunk: r2 gets one, r3 finds nothing,
    # r4 is not even tried.
    assert h.popper.calls == [["r1"], ["r2", "r3", "r4"]]
    assert h.worker.counters.pops == 3
    assert [h.answer(r) is not None for r in ["r1", "r2", "r3", "r4"]] == [True, True, False, False]
    assert [it.request_id for it in h.registry.intentions_for(KEY)] == ["r3", "r4"]


def test_a_hot_queue_of_idle_waiters_costs_one_small_pop_per_round(h: Harness) -> None:
    for i in range(1000):
        h.wait(f"r{i}")
    h.worker.run_once(0.0)
    assert h.popper.calls == [["r0"]]  # not a call carrying all 1,000 waiters
    h.popper.add(KEY, 100)
    h.registry.reset_backoff(KEY)
    h.worker.run_once(0.01)
    sizes = [len(call) for call in h.popper.calls[1:]]
    assert sizes == [1, 4, 16, 64, 64] and max(sizes) <= GROUP_CHUNK_MAX
    assert h.worker.counters.delivered == 100 and h.registry.size() == 900


def test_delivery_to_a_removed_intention_releases_its_lease(h: Harness) -> None:
    h.wait("r1")
    h.wait("r2")
    h.popper.add(KEY, 2)

    def client_r1_leaves(_: object) -> None:
        h.registry.remove("r1")  # disconnect noticed while the pop ran
        h.queue.abandon("r1")

    h.popper.on_pop = client_r1_leaves
    h.worker.run_once(0.0)
    assert h.popper.released == ["lease-1"]
    assert h.worker.counters.released_leases == 1
    assert h.answer("r2") is not None


def test_delivery_to_a_closed_slot_releases_its_lease(h: Harness) -> None:
    h.wait("r1")
    h.queue.abandon("r1")  # waiter gone but intention still registered
    h.popper.add(KEY, 1)
    h.worker.run_once(0.0)
    assert h.popper.released == ["lease-1"]
    assert h.registry.size() == 0


def test_backoff_skips_rounds_until_due(h: Harness) -> None:
    h.wait("r1")
    h.worker.run_once(0.0)  # empty: next round at 0.2
    h.worker.run_once(0.1)
    assert len(h.popper.calls) == 1
    h.worker.run_once(0.2)  # empty: next at 0.6
    h.worker.run_once(0.5)
    assert len(h.popper.calls) == 2
    h.popper.add(KEY, 1)
    h.worker.run_once(0.6)
    assert h.answer("r1") is not None


def test_sleep_time_follows_next_due_deadline_and_interval() -> None:
    h = Harness(interval_ms=5000)
    assert h.worker.run_once(0.0) == 5.0  # nothing waiting: the worker interval
    h.wait("r1", timeout_s=1.0)
    assert h.worker.run_once(0.0) == pytest.approx(0.2)  # next backoff round
    h.clock.now = 0.9
    assert h.worker.run_once(0.9) == pytest.approx(0.1)  # the deadline comes first


def test_due_on_ticks_checks_due_groups_together_on_the_tick() -> None:
    ticks, precise = Harness(interval_ms=100, due_on_ticks=True), Harness(interval_ms=100)
    for h in (ticks, precise):
        h.wait("a1", queue="a")
        h.wait("b1", queue="b")
        h.worker.wake("register")
        h.worker.run_once(0.0)
        assert h.popper.calls == [["a1", "b1"]]  # new groups: at once, in one call
        h.worker.run_once(0.1)  # a tick; a and b are due again at 0.2
        h.wait("c1", queue="c")  # registered without a wake-up: due, not yet checked
        h.worker.run_once(0.15)
    assert precise.popper.calls[1:] == [["c1"]]  # checked at its own moment
    assert ticks.popper.calls[1:] == []  # waits for the tick
    assert ticks.worker.run_once(0.15) == pytest.approx(0.05)  # sleeps until the next tick
    ticks.worker.run_once(0.2)  # the tick: a and b are due again, c since 0.15
    assert ticks.popper.calls[1:] == [["a1", "b1", "c1"]]
    ticks.popper.add(qk("a:*:g"), 1)
    ticks.registry.reset_matching("a")
    ticks.worker.wake("push")  # a wake-up between ticks runs a pass at once
    ticks.worker.run_once(0.3)
    assert ticks.popper.calls[2:] == [["a1"]] and ticks.answer("a1") is not None


def test_push_reset_makes_the_group_due_at_once(h: Harness) -> None:
    h.wait("r1")
    for t in (0.0, 0.2, 0.6, 1.4):
        h.clock.now = t
        h.worker.run_once(t)
    assert len(h.popper.calls) == 4  # interval is now 1600 ms
    h.clock.now = 1.5
    assert h.worker.run_once(1.5) > 0
    h.popper.add(KEY, 1)
    assert h.registry.reset_matching("q", "Default") == {0}
    assert h.worker.run_once(1.5) == 0.05  # answered; nothing left but the interval
    assert h.answer("r1") is not None


def test_popper_errors_are_logged_and_intentions_stay(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h.wait("r1")
    h.popper.fail_with = RuntimeError("database down")
    with caplog.at_level(logging.ERROR, logger="queen_threads.polling"):
        h.worker.run_once(0.0)
    assert "database down" in caplog.text
    assert h.worker.counters.errors == 1
    assert h.registry.get("r1") is not None
    assert h.registry.mark_in_flight(KEY)  # was unmarked
    h.registry.unmark_in_flight(KEY)
    h.worker.run_once(0.1)
    assert len(h.popper.calls) == 1  # backed off: not hammering a failing database


def test_a_group_in_flight_elsewhere_is_skipped(h: Harness) -> None:
    h.wait("r1")
    h.popper.add(KEY, 1)
    assert h.registry.mark_in_flight(KEY)
    assert h.worker.run_once(0.0) == 0.05  # not due-now forever: sleeps the interval
    assert h.popper.calls == []
    h.registry.unmark_in_flight(KEY)
    h.worker.run_once(0.0)
    assert h.answer("r1") is not None


def test_each_worker_serves_only_its_shard() -> None:
    h = Harness(workers=2)
    names = {shard_of(qk(f"q{i}:*:g"), 2): f"q{i}" for i in range(20)}
    h.wait("a", queue=names[0])
    h.wait("b", queue=names[1])
    h.popper.add(qk(f"{names[0]}:*:g"), 1)
    h.popper.add(qk(f"{names[1]}:*:g"), 1)
    h.workers[1].run_once(0.0)
    assert h.popper.calls == [["b"]]
    h.workers[0].run_once(0.0)
    assert h.popper.calls == [["b"], ["a"]]


def test_worker_zero_cleans_idle_backoff_states(h: Harness) -> None:
    h.wait("r1", timeout_s=1.0)
    h.worker.run_once(0.0)
    h.worker.run_once(1.0)  # expired
    assert h.registry.stats().backoff_states == 1
    h.clock.now = 4000.0
    h.worker.run_once(4000.0)
    assert h.registry.stats().backoff_states == 0


def test_wake_counts_sources(h: Harness) -> None:
    h.worker.wake("register")
    h.worker.wake("push")
    h.worker.wake("peer")
    h.worker.wake("peer")
    assert h.worker.counters.wakeups == {
        "register": 1,
        "push": 1,
        "notify": 0,
        "peer": 2,
        "sibling": 0,
    }


def test_many_due_groups_share_one_pop_call_for_their_heads(h: Harness) -> None:
    for q in ("a", "b", "c"):
        h.wait(f"{q}1", queue=q)
    h.wait("b2", queue="b")
    h.popper.add(qk("b:*:g"), 5)
    h.worker.run_once(0.0)
    # One call for the three heads; then the rest of the only group that had messages.
    assert h.popper.calls == [["a1", "b1", "c1"], ["b2"]]
    assert [h.answer(r) is not None for r in ("a1", "b1", "c1", "b2")] == [
        False, True, False, True,
    ]  # fmt: skip
    assert h.registry.backoff_state(qk("a:*:g")).interval_ms == 200  # type: ignore[union-attr]
    assert h.registry.backoff_state(qk("b:*:g")).interval_ms == 100  # type: ignore[union-attr]


def test_failed_head_call_counts_as_an_empty_round_for_every_group(h: Harness) -> None:
    h.wait("a1", queue="a")
    h.wait("b1", queue="b")
    h.popper.fail_with = RuntimeError("database down")
    h.worker.run_once(0.0)
    assert h.worker.counters.errors == 1
    assert h.registry.size() == 2, "intentions stay registered"
    assert not h.registry.is_due(qk("a:*:g"), 0.05), "backoff applied"


def test_woken_groups_are_popped_in_a_call_of_their_own_before_the_backoff_ones(
    h: Harness,
) -> None:
    """A push's waiters do not wait for the backoff pops of idle groups: the groups a
    wake-up made due go first, in their own call."""
    for queue in ("idle1", "idle2", "busy"):
        h.wait(f"{queue}-r", queue=queue)
    h.worker.run_once(0.0)  # first checks: all empty, each group backs off (200 ms)
    assert h.popper.calls == [["idle1-r", "idle2-r", "busy-r"]]
    h.popper.add(qk("busy:*:g"), 1)
    h.registry.reset_matching("busy")  # a push to "busy" wakes its group
    h.worker.run_once(0.2)  # the idle groups' backoff came at the same moment
    assert h.popper.calls[1:] == [["busy-r"], ["idle1-r", "idle2-r"]]
    assert h.answer("busy-r") is not None
