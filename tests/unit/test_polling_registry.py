"""PollIntentionRegistry: capacity, claims, FIFO groups, backoff, expiry, wake matching."""

from __future__ import annotations

from typing import Any

import pytest

from queen_threads.errors import QueenError
from queen_threads.polling import (
    BackoffPolicy,
    PollIntentionRegistry,
    RegistryClosed,
    RegistryFull,
    shard_of,
)
from queen_threads.polling.clock import ManualClock
from tests.support.keys import nk, qk
from tests.support.polling_fakes import make_intention


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0.0)


@pytest.fixture
def registry(clock: ManualClock) -> PollIntentionRegistry:
    return PollIntentionRegistry(capacity=100, worker_count=4, clock=clock)


def test_register_returns_the_owning_shard(registry: PollIntentionRegistry) -> None:
    shard = registry.register(make_intention("r1", queue="orders", consumer_group="g"))
    assert shard == shard_of(qk("orders:*:g"), 4)
    assert registry.group_keys_for(shard) == [qk("orders:*:g")]
    assert registry.size() == 1
    assert [it.request_id for it in registry.snapshot()] == ["r1"]


def test_duplicate_request_id_is_rejected(registry: PollIntentionRegistry) -> None:
    registry.register(make_intention("r1", queue="q"))
    with pytest.raises(ValueError):
        registry.register(make_intention("r1", queue="q"))


def test_full_registry_raises_and_keeps_everything(clock: ManualClock) -> None:
    registry = PollIntentionRegistry(capacity=2, worker_count=1, clock=clock)
    registry.register(make_intention("a", queue="q"))
    registry.register(make_intention("b", queue="q"))
    with pytest.raises(RegistryFull) as caught:
        registry.register(make_intention("c", queue="q"))
    assert caught.value.capacity == 2
    assert registry.size() == 2
    registry.remove("a")
    registry.register(make_intention("c", queue="q"))
    assert [it.request_id for it in registry.intentions_for(qk("q:*:__QUEUE_MODE__"))] == ["b", "c"]
    stats = registry.stats()
    assert (stats.registered, stats.rejected) == (3, 1)


def test_closed_registry_refuses_and_drain_empties(registry: PollIntentionRegistry) -> None:
    registry.register(make_intention("a", queue="q"))
    registry.register(make_intention("b", namespace="ns"))
    registry.close()
    with pytest.raises(RegistryClosed):
        registry.register(make_intention("c", queue="q"))
    assert [it.request_id for it in registry.drain()] == ["a", "b"]
    assert registry.size() == 0
    assert registry.stats().groups == 0


def test_remove_is_an_atomic_claim(registry: PollIntentionRegistry) -> None:
    registry.register(make_intention("r1", queue="q"))
    first = registry.remove("r1")
    assert first is not None and first.request_id == "r1"
    assert registry.remove("r1") is None
    assert registry.get("r1") is None


def test_group_is_fifo_by_registration(registry: PollIntentionRegistry) -> None:
    for rid in ["c", "a", "d", "b"]:
        registry.register(make_intention(rid, queue="q", partition="p", consumer_group="g"))
    registry.remove("d")
    registry.register(make_intention("e", queue="q", partition="p", consumer_group="g"))
    assert [it.request_id for it in registry.intentions_for(qk("q:p:g"))] == ["c", "a", "b", "e"]


def test_group_key_disappears_when_its_last_intention_leaves(
    registry: PollIntentionRegistry,
) -> None:
    shard = registry.register(make_intention("a", queue="q"))
    registry.remove("a")
    assert registry.group_keys_for(shard) == []
    assert registry.intentions_for(qk("q:*:__QUEUE_MODE__")) == []
    assert registry.stats().backoff_states == 1  # kept until idle cleanup


def test_in_flight_is_exclusive(registry: PollIntentionRegistry) -> None:
    assert registry.mark_in_flight(qk("q:*:g"))
    assert not registry.mark_in_flight(qk("q:*:g"))
    assert registry.mark_in_flight(qk("q:p:g"))
    registry.unmark_in_flight(qk("q:*:g"))
    assert registry.mark_in_flight(qk("q:*:g"))
    assert registry.stats().in_flight == 2


def test_backoff_rounds_and_due_times(registry: PollIntentionRegistry, clock: ManualClock) -> None:
    key = qk("q:*:__QUEUE_MODE__")
    registry.register(make_intention("a", queue="q"))
    assert registry.is_due(key, 0.0)
    registry.record_round(key, False, 0.0)
    assert not registry.is_due(key, 0.199)
    assert registry.is_due(key, 0.2)
    registry.record_round(key, False, 0.2)  # interval now 400 ms
    assert registry.next_due(shard_of(key, 4)) == pytest.approx(0.6)
    registry.record_round(key, True, 0.6)
    state = registry.backoff_state(key)
    assert state is not None and state.interval_ms == 100


def test_first_intention_of_a_group_is_due_at_once_later_ones_wait(
    registry: PollIntentionRegistry,
) -> None:
    key = qk("q:*:__QUEUE_MODE__")
    registry.register(make_intention("a", queue="q"))
    for t in (0.0, 0.1, 0.3, 0.7):
        registry.record_round(key, False, t)  # interval 1600 ms after four empty rounds
    registry.register(make_intention("b", queue="q"))  # joins a waiting group
    assert not registry.is_due(key, 1.0)
    registry.remove("a")
    registry.remove("b")
    registry.register(make_intention("c", queue="q"))  # first of the group again
    assert registry.is_due(key, 1.0)
    state = registry.backoff_state(key)
    assert state is not None and state.interval_ms == 1600  # due now, interval kept


def test_reset_during_a_round_is_not_lost(registry: PollIntentionRegistry) -> None:
    key = qk("q:*:__QUEUE_MODE__")
    registry.register(make_intention("a", queue="q"))
    assert registry.mark_in_flight(key)
    registry.reset_matching("q")  # a push lands while the round's pop is running
    registry.record_round(key, False, 5.0)  # the round saw nothing
    registry.unmark_in_flight(key)
    assert registry.is_due(key, 5.0)


def test_reset_backoff_of_one_key(registry: PollIntentionRegistry) -> None:
    key = qk("q:p:g")
    shard = registry.register(make_intention("a", queue="q", partition="p", consumer_group="g"))
    for t in (0.0, 1.0, 2.0):
        registry.record_round(key, False, t)
    assert registry.reset_backoff(key) == shard
    state = registry.backoff_state(key)
    assert state is not None and (state.interval_ms, state.consecutive_empty) == (100, 0)
    assert registry.reset_backoff(qk("missing:*:g")) is None


def _register_keys(registry: PollIntentionRegistry, specs: dict[str, dict[str, Any]]) -> None:
    for rid, fields in specs.items():
        registry.register(make_intention(rid, **fields))


def _backed_off(registry: PollIntentionRegistry, keys: list[str]) -> None:
    for key in keys:
        registry.record_round(key, False, 0.0)


def test_reset_matching_queue_partition_and_group(clock: ManualClock) -> None:
    registry = PollIntentionRegistry(worker_count=8, clock=clock)
    _register_keys(
        registry,
        {
            "1": {"queue": "q", "partition": "p", "consumer_group": "g"},
            "2": {"queue": "q", "consumer_group": "g"},
            "3": {"queue": "q", "partition": "other", "consumer_group": "g"},
            "4": {"queue": "q", "partition": "p", "consumer_group": "h"},
            "5": {"queue": "elsewhere", "partition": "p", "consumer_group": "g"},
        },
    )
    keys = [
        qk("q:p:g"),
        qk("q:*:g"),
        qk("q:other:g"),
        qk("q:p:h"),
        qk("elsewhere:p:g"),
    ]
    _backed_off(registry, keys)

    def due() -> set[str]:
        return {key for key in keys if registry.is_due(key, 0.01)}

    assert due() == set()
    shards = registry.reset_matching("q", "p", "g")
    assert due() == {qk("q:p:g"), qk("q:*:g")}
    assert shards == {shard_of(qk("q:p:g"), 8), shard_of(qk("q:*:g"), 8)}

    _backed_off(registry, keys)
    assert registry.reset_matching("q", "p") == {
        shard_of(k, 8) for k in (qk("q:p:g"), qk("q:*:g"), qk("q:p:h"))
    }
    assert due() == {qk("q:p:g"), qk("q:*:g"), qk("q:p:h")}

    _backed_off(registry, keys)
    registry.reset_matching("q")  # every partition, every group
    assert due() == {qk("q:p:g"), qk("q:*:g"), qk("q:other:g"), qk("q:p:h")}


def test_reset_matching_wakes_namespace_and_task_groups(clock: ManualClock) -> None:
    registry = PollIntentionRegistry(worker_count=8, clock=clock)
    _register_keys(
        registry,
        {
            "1": {"namespace": "billing", "task": "invoice", "consumer_group": "g"},
            "2": {"namespace": "billing", "consumer_group": "g"},
            "3": {"task": "invoice", "consumer_group": "g"},
            "4": {"namespace": "billing", "task": "refund", "consumer_group": "g"},
            "5": {"namespace": "shipping", "consumer_group": "g"},
            "6": {"namespace": "billing", "consumer_group": "other"},
        },
    )
    keys = [
        nk("billing:invoice:g"),
        nk("billing:*:g"),
        nk("*:invoice:g"),
        nk("billing:refund:g"),
    ]
    keys += [nk("shipping:*:g"), nk("billing:*:other")]
    _backed_off(registry, keys)
    shards = registry.reset_matching("invoices-q", "p", "g", namespace="billing", task="invoice")
    woken = {nk("billing:invoice:g"), nk("billing:*:g"), nk("*:invoice:g")}
    assert {key for key in keys if registry.is_due(key, 0.01)} == woken
    assert shards == {shard_of(key, 8) for key in woken}
    # A queue without namespace/task wakes no namespace-mode group.
    _backed_off(registry, keys)
    assert registry.reset_matching("plain-q") == set()


def test_reset_matching_ignores_groups_without_waiters(registry: PollIntentionRegistry) -> None:
    registry.register(make_intention("a", queue="q"))
    registry.remove("a")
    assert registry.reset_matching("q") == set()


def test_expiry_only_after_the_deadline_and_only_for_the_owner(clock: ManualClock) -> None:
    registry = PollIntentionRegistry(worker_count=2, clock=clock)
    # Find two queues whose groups land on different shards.
    names = [f"q{i}" for i in range(20)]
    by_shard = {shard_of(qk(f"{n}:*:__QUEUE_MODE__"), 2): n for n in names}
    mine, other = by_shard[0], by_shard[1]
    registry.register(make_intention("early", queue=mine, timeout_s=5.0))
    registry.register(make_intention("late", queue=mine, timeout_s=10.0))
    registry.register(make_intention("gone", queue=mine, timeout_s=3.0))
    registry.register(make_intention("foreign", queue=other, timeout_s=1.0))
    registry.remove("gone")
    assert registry.next_deadline(0) == 5.0
    assert registry.pop_expired(0, 4.999) == []
    assert [it.request_id for it in registry.pop_expired(0, 5.0)] == ["early"]
    assert registry.pop_expired(0, 9.0) == []
    assert registry.next_deadline(0) == 10.0
    assert registry.get("foreign") is not None
    assert [it.request_id for it in registry.pop_expired(1, 9.0)] == ["foreign"]
    assert registry.next_deadline(1) is None


def test_dead_expiry_entries_are_compacted(registry: PollIntentionRegistry) -> None:
    for i in range(500):
        shard = registry.register(make_intention(f"r{i}", queue="q"))
        registry.remove(f"r{i}")
    assert len(registry._heaps[shard]) <= 65


def test_next_due_skips_groups_in_flight(registry: PollIntentionRegistry) -> None:
    shard = registry.register(make_intention("a", queue="q"))
    assert registry.next_due(shard) == float("-inf")
    registry.mark_in_flight(qk("q:*:__QUEUE_MODE__"))
    assert registry.next_due(shard) is None


def test_cleanup_idle_keeps_live_and_recent_groups(clock: ManualClock) -> None:
    registry = PollIntentionRegistry(worker_count=1, clock=clock, policy=BackoffPolicy())
    registry.register(make_intention("old", queue="old"))
    registry.register(make_intention("live", queue="live"))
    registry.remove("old")  # idle from t=0
    clock.advance(3000.0)
    registry.register(make_intention("recent", queue="recent"))
    registry.remove("recent")  # idle from t=3000
    assert registry.cleanup_idle(3600.0, 3601.0) == 1
    assert registry.backoff_state(qk("old:*:__QUEUE_MODE__")) is None
    assert registry.backoff_state(qk("live:*:__QUEUE_MODE__")) is not None
    assert registry.backoff_state(qk("recent:*:__QUEUE_MODE__")) is not None


def test_stats(registry: PollIntentionRegistry) -> None:
    registry.register(make_intention("a", queue="q1"))
    registry.register(make_intention("b", queue="q1"))
    registry.register(make_intention("c", queue="q2", consumer_group="g"))
    registry.mark_in_flight(qk("q1:*:__QUEUE_MODE__"))
    stats = registry.stats()
    assert (stats.intentions, stats.groups, stats.in_flight, stats.backoff_states) == (3, 2, 1, 2)
    assert sum(stats.groups_per_shard) == 2 and len(stats.groups_per_shard) == 4
    assert stats.capacity == 100


def test_due_keys_lists_due_groups_not_in_flight(registry: PollIntentionRegistry) -> None:
    for name in ("a", "b", "c"):
        registry.register(make_intention(name, queue=name))
    everything = [k for s in range(4) for k in registry.due_keys(s, 0.0)]
    assert sorted(everything) == [
        qk("a:*:__QUEUE_MODE__"),
        qk("b:*:__QUEUE_MODE__"),
        qk("c:*:__QUEUE_MODE__"),
    ]
    registry.record_round(qk("a:*:__QUEUE_MODE__"), False, 0.0)
    registry.mark_in_flight(qk("b:*:__QUEUE_MODE__"))
    assert [k for s in range(4) for k in registry.due_keys(s, 0.1)] == [qk("c:*:__QUEUE_MODE__")]


def test_polling_errors_belong_to_the_one_hierarchy() -> None:
    assert issubclass(RegistryFull, QueenError) and issubclass(RegistryClosed, QueenError)
