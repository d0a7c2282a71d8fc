"""WakeInterest (wake/interest.py) and CoveringPopper (polling/popper.py): a poll's
selectors are registered, committed, before the pop for it, renewed while it waits, and
withdrawn at shutdown. The SQL side is in tests/integration/test_wake_interest.py."""

from __future__ import annotations

from typing import Any

import pytest

from queen_threads.polling import (
    CoveringPopper,
    GroupSelector,
    ManualClock,
    PollIntentionRegistry,
    PollStack,
    ResponseQueues,
)
from queen_threads.polling.backoff import BackoffPolicy
from queen_threads.wake.interest import WakeInterest
from tests.support.polling_fakes import InMemoryPopper, make_intention


class Database:
    """Records the interest calls in order; `fail` makes the next one raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail = False

    def register(self, interest: dict[str, Any]) -> int:
        if self.fail:
            self.fail = False
            raise ConnectionError("database down")
        self.calls.append(("register", interest))
        return len(interest["selectors"])

    def withdraw(self, origin: str) -> int:
        self.calls.append(("withdraw", origin))
        return 1

    def registered(self) -> list[list[dict[str, Any]]]:
        return [call["selectors"] for kind, call in self.calls if kind == "register"]


def queue(name: str, partition: str | None = None, group: str = "g") -> GroupSelector:
    return GroupSelector(name, partition, None, None, group)


def scope(namespace: str | None, task: str | None, group: str = "g") -> GroupSelector:
    return GroupSelector(None, None, namespace, task, group)


@pytest.fixture
def db() -> Database:
    return Database()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1000.0)


@pytest.fixture
def interest(db: Database, clock: ManualClock) -> WakeInterest:
    return WakeInterest(db.register, db.withdraw, "me", ttl_s=60.0, clock=clock)


def test_cover_registers_each_queue_or_scope_once_whatever_the_partition_or_group(
    interest: WakeInterest, db: Database
) -> None:
    interest.cover([queue("a", "p1"), queue("a", "p2", "h"), scope("ns", None), scope(None, "t")])
    [selectors] = db.registered()
    assert sorted(selectors, key=str) == sorted(
        [{"queue": "a"}, {"namespace": "ns", "task": None}, {"namespace": None, "task": "t"}],
        key=str,
    )
    assert db.calls[0][1]["origin"] == "me" and db.calls[0][1]["ttlMs"] == 60_000


def test_a_covered_key_costs_no_call_until_half_its_time_is_gone(
    interest: WakeInterest, db: Database, clock: ManualClock
) -> None:
    interest.cover([queue("a")])
    clock.advance(29.9)
    interest.cover([queue("a")])
    assert len(db.registered()) == 1
    interest.cover([queue("a"), queue("b")])  # only the new one is sent
    assert db.registered()[1] == [{"queue": "b"}]
    clock.advance(0.2)  # "a" has less than half its 60 s left
    interest.cover([queue("a"), queue("b")])
    assert db.registered()[2] == [{"queue": "a"}]


def test_a_failed_registration_raises_and_is_tried_again(
    interest: WakeInterest, db: Database
) -> None:
    db.fail = True
    with pytest.raises(ConnectionError):
        interest.cover([queue("a")])
    interest.cover([queue("a")])
    assert db.registered() == [[{"queue": "a"}]]
    assert interest.stats()["failed"] == 1


def test_renew_keeps_the_watched_selectors_covered_and_forgets_run_out_keys(
    interest: WakeInterest, db: Database, clock: ManualClock
) -> None:
    waiting = {queue("a")}
    interest.watch(lambda: waiting)
    interest.cover([queue("gone")])
    interest.renew()
    assert db.registered() == [[{"queue": "gone"}], [{"queue": "a"}]]
    clock.advance(31)
    interest.renew()  # "a" still waits: renewed before its row runs out; "gone" is not
    assert db.registered()[2] == [{"queue": "a"}]
    clock.advance(30)
    interest.renew()
    assert interest.stats()["keys"] == 1  # "gone" ran out and was forgotten


def test_stop_withdraws_the_process_rows_once(interest: WakeInterest, db: Database) -> None:
    interest.cover([queue("a")])
    interest.stop()
    assert db.calls[-1] == ("withdraw", "me")
    interest.stop()
    assert [kind for kind, _ in db.calls].count("withdraw") == 1


def test_stop_without_rows_costs_no_call(interest: WakeInterest, db: Database) -> None:
    interest.stop()
    assert db.calls == []


def test_the_covering_popper_registers_before_it_pops(interest: WakeInterest, db: Database) -> None:
    """Registration first, then the pop: the order that makes a wake-up impossible to miss."""
    popper = InMemoryPopper()
    order: list[str] = []
    popper.on_pop = lambda intentions: order.append(f"pop {len(db.calls)}")
    covering = CoveringPopper(popper, interest)
    covering.pop_group([make_intention("r1", queue="a"), make_intention("r2", queue="a")])
    covering.pop_heads([make_intention("r3", namespace="ns", task="t")])
    assert order == ["pop 1", "pop 2"]
    assert db.registered() == [[{"queue": "a"}], [{"namespace": "ns", "task": "t"}]]
    covering.release(["lease-1"])
    assert popper.released == ["lease-1"]


def test_a_failed_registration_means_no_pop(interest: WakeInterest, db: Database) -> None:
    popper = InMemoryPopper()
    db.fail = True
    with pytest.raises(ConnectionError):
        CoveringPopper(popper, interest).pop_group([make_intention("r1", queue="a")])
    assert popper.calls == []


def test_a_poll_stack_with_a_cover_pops_through_it(interest: WakeInterest, db: Database) -> None:
    popper = InMemoryPopper()
    stack = PollStack(
        popper,
        ResponseQueues(),
        policy=BackoffPolicy(),
        capacity=10,
        worker_count=1,
        worker_interval_ms=50,
        cleanup_threshold_s=60,
        cover=interest,
    )
    stack.registry.register(make_intention("r1", queue="a", timeout_s=1e9))
    stack.pool.workers[0].run_once()
    assert popper.calls == [["r1"]]
    assert db.registered() == [[{"queue": "a"}]]


def test_the_registry_reports_the_selectors_of_groups_that_wait() -> None:
    registry: PollIntentionRegistry[Any] = PollIntentionRegistry(worker_count=1)
    registry.register(make_intention("r1", queue="a", partition="p", consumer_group="g"))
    registry.register(make_intention("r2", namespace="ns", consumer_group="g"))
    registry.register(make_intention("r3", queue="b", consumer_group="g"))
    registry.remove("r3")
    assert registry.waiting_selectors() == {
        GroupSelector("a", "p", None, None, "g"),
        GroupSelector(None, None, "ns", None, "g"),
    }
