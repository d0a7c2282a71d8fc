"""Linger (queen_threads/polling/linger.py): a busy partition's messages wait for company
up to the cap; a quiet one's are popped at once. Driven by hand: a manual clock, one poll
worker, a popper that keeps messages per partition and takes the one waiting longest."""

from __future__ import annotations

import itertools

import pytest

from queen_threads.polling import LingerPolicy, PollIntentionRegistry, PollWorker, ResponseQueues
from queen_threads.polling.clock import ManualClock
from queen_threads.polling.linger import DEADLINE_MARGIN_S
from queen_threads.queue.intention import PollIntention
from tests.support.polling_fakes import PartitionedPopper, make_intention

CAP = 0.020  # the linger cap of these tests, s
GAP = 0.004  # a busy partition's messages come this often


class Harness:
    def __init__(self, cap: float = CAP) -> None:
        self.clock = ManualClock(0.0)
        self.registry = PollIntentionRegistry[PollIntention](
            worker_count=1,
            clock=self.clock,
            linger=LingerPolicy(cap),
            batch_of=lambda intention: intention.request.batch,
        )
        self.popper = PartitionedPopper()
        self.responses = ResponseQueues()
        self.queue = self.responses.queue_for(0)
        self.worker = PollWorker(0, 1, self.registry, self.popper, self.responses, clock=self.clock)
        self._ids = itertools.count(1)

    def wait(self, batch: int = 10, timeout_s: float = 30.0) -> str:
        rid = f"r{next(self._ids)}"
        self.queue.open(rid)
        intention = make_intention(
            rid, created_at=self.clock.now, timeout_s=timeout_s, queue="q", batch=batch
        )
        self.registry.register(intention)
        return rid

    def push(self, partition: str, count: int = 1) -> set[int]:
        self.popper.add(partition, self.clock.now, count)
        return self.registry.reset_matching("q", partition, count=count)

    def free(self, partition: str) -> set[int]:
        return self.registry.reset_matching("q", partition, "__QUEUE_MODE__")

    def run(self, at: float) -> list[str | None]:
        """One pass at `at`: the partitions its pops took."""
        self.clock.now = at
        before = len(self.popper.taken)
        self.worker.run_once(at)
        return self.popper.taken[before:]

    def answered(self, rid: str) -> int | None:
        response = self.queue.wait(rid, 0)
        return None if response is None else response.status

    def make_busy(self, partition: str, start: float = 1.0, timeout_s: float = 30.0) -> float:
        """Messages every GAP to `partition`, each popped at once by a consumer that comes
        back, until the partition counts as busy (a push no longer makes a pop at once).
        Returns the time of the last push, the one that lingers (its consumer waits)."""
        t = start
        for _ in range(100):
            self.clock.now = t
            rid = self.wait(timeout_s=timeout_s)
            self.clock.now = t
            self.push(partition)
            if self.run(t) == []:
                return t  # lingering: nothing popped at once
            assert self.answered(rid) == 200
            t += GAP
        raise AssertionError("the partition never became busy")


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_a_lone_message_of_an_idle_queue_is_popped_at_once(h: Harness) -> None:
    rid = h.wait()
    assert h.run(0.0) == [None]  # the first check finds nothing
    h.clock.now = 5.0
    assert h.push("p0") == {0}
    assert h.run(5.0) == ["p0"]
    assert h.answered(rid) == 200


def test_a_busy_partition_waits_until_its_oldest_message_is_ripe(h: Harness) -> None:
    last = h.make_busy("p0")
    # The lingering message waits; more arrive meanwhile.
    h.clock.now = last + 0.005
    h.push("p0")
    assert h.run(last + 0.005) == []
    assert h.run(last + CAP - 0.001) == []
    assert h.run(last + CAP) == ["p0"]
    assert h.popper.messages["p0"] == []  # both went in one pop


def test_a_full_batch_is_popped_at_once(h: Harness) -> None:
    last = h.make_busy("p0")
    h.clock.now = last + 0.001
    h.push("p0", count=9)  # 1 + 9 = the waiting pop's batch of 10
    assert h.run(last + 0.001) == ["p0"]


def test_a_quiet_partition_beside_a_busy_one_is_popped_at_once(h: Harness) -> None:
    last = h.make_busy("p0")
    h.wait()  # a second consumer
    h.clock.now = last + 0.002
    h.push("p9")  # quiet: its first message
    taken = h.run(last + 0.002)
    assert taken and taken[0] in ("p0", "p9")  # a pop at once, the oldest first


def test_a_message_never_waits_past_the_polls_deadline() -> None:
    h = Harness(cap=1.0)  # a long cap, to meet the deadline first
    last = h.make_busy("p0", timeout_s=0.050)  # its last consumer waits until last + 0.050
    rid = f"r{h.registry.size() and h.registry.snapshot()[0].request_id[1:]}"
    deadline = last + 0.050
    assert h.run(deadline - DEADLINE_MARGIN_S - 0.001) == []
    assert h.run(deadline - DEADLINE_MARGIN_S) == ["p0"]
    assert h.answered(rid) == 200  # answered with its message, not expired beside it


def test_only_ripe_partitions_are_popped_the_others_wait(h: Harness) -> None:
    for _ in range(4):
        h.wait()
    t = 1.0
    for _ in range(30):  # wake-ups of two busy partitions, their messages taken elsewhere
        h.clock.now = t
        h.registry.reset_matching("q", "p0")
        h.clock.now = t + GAP / 2
        h.registry.reset_matching("q", "p1")
        t += GAP
    assert h.run(t) == [None]  # nothing there: the hints are stale
    h.clock.now = t + 0.001
    h.push("p1")  # ripe at t + 0.001 + CAP
    h.clock.now = t + 0.010
    h.push("p0")  # ripe at t + 0.010 + CAP
    assert h.run(t + 0.001 + CAP) == ["p1"]  # one pop: p0 is not ripe yet
    assert h.registry.size() == 3
    assert h.run(t + 0.010 + CAP) == ["p0"]
    assert h.registry.size() == 2


def test_a_message_that_arrives_during_a_round_keeps_its_hint(h: Harness) -> None:
    last = h.make_busy("p0")
    h.wait()
    arrived: list[float] = []

    def push_during_the_pop(_: object) -> None:
        if not arrived:  # the first pop's answer is on its way: p0 gets one more
            arrived.append(h.clock.now)
            h.push("p0")

    h.popper.on_pop = push_during_the_pop
    assert h.run(last + CAP) == ["p0"]
    # The round may not have seen the new message: it is popped when ripe, not forgotten.
    assert h.popper.messages["p0"] == [arrived[0]]
    assert h.run(arrived[0] + CAP) == ["p0"]


def test_a_freed_partition_with_waiting_messages_is_popped_when_they_are_ripe(
    h: Harness,
) -> None:
    last = h.make_busy("p0")
    # p0's message was taken by a consumer elsewhere: p0 is leased, its new messages wait.
    h.popper.messages["p0"].clear()
    h.clock.now = last + 0.002
    h.push("p0")
    assert h.free("p0") == set()  # ripe at last + CAP already planned: no earlier wake
    assert h.run(last + CAP) == ["p0"]


def test_a_freed_partition_nothing_is_known_of_is_popped_at_once(h: Harness) -> None:
    last = h.make_busy("p0")
    h.popper.add("p5", last)  # messages the wake-ups never told of
    h.clock.now = last + 0.003
    assert h.free("p5") == {0}
    assert h.run(last + 0.003)  # a pop at once


def test_without_linger_every_push_pops_at_once() -> None:
    h = Harness(cap=0.0)
    for k in range(30):
        rid = h.wait()
        h.clock.now = 1.0 + k * GAP
        h.push("p0")
        assert h.run(h.clock.now) == ["p0"]
        assert h.answered(rid) == 200


def test_a_ripe_partition_another_process_took_does_not_take_the_next(h: Harness) -> None:
    """A ripe partition is popped by name: if another process's worker took it, the pop
    comes back empty, the next partition (not ripe yet) stays where it is, and only the
    emptied partition's hint is dropped."""
    h.wait()
    t = 1.0
    for _ in range(30):  # two busy partitions
        h.clock.now = t
        h.registry.reset_matching("q", "p0")
        h.clock.now = t + GAP / 2
        h.registry.reset_matching("q", "p1")
        t += GAP
    assert h.run(t) == [None] and h.run(t) == [None]  # stale hints, each popped: empty
    assert h.run(t) == []  # and forgotten
    h.clock.now = t + 0.001
    h.push("p0")  # ripe at t + 0.001 + CAP
    h.clock.now = t + 0.005
    h.push("p1")  # ripe at t + 0.005 + CAP
    h.popper.messages["p0"].clear()  # another process's poll worker took p0
    assert h.run(t + 0.001 + CAP) == [None]  # p0 by name: empty; p1 not touched
    assert len(h.popper.messages["p1"]) == 1
    assert h.run(t + 0.003 + CAP) == []  # p1 still waits for its own ripeness
    assert h.run(t + 0.005 + CAP) == ["p1"]
