"""Backoff arithmetic of the poll workers (POLL_DB_INTERVAL and QUEUE_BACKOFF_*)."""

from __future__ import annotations

import math

import pytest

from queen_threads.polling import BackoffPolicy, BackoffState


def _intervals_after_empty_rounds(policy: BackoffPolicy, rounds: int) -> list[int]:
    state = policy.new_state(0.0)
    seen = [state.interval_ms]
    for n in range(rounds):
        policy.after_round(state, False, float(n))
        seen.append(state.interval_ms)
    return seen


def test_default_sequence_doubles_to_the_cap() -> None:
    seen = _intervals_after_empty_rounds(BackoffPolicy(), 7)
    assert seen == [100, 200, 400, 800, 1600, 2000, 2000, 2000]


def test_delivery_resets_to_base_and_clears_the_empty_count() -> None:
    policy = BackoffPolicy()
    state = policy.new_state(0.0)
    for n in range(4):
        policy.after_round(state, False, float(n))
    assert (state.consecutive_empty, state.interval_ms) == (4, 1600)
    policy.after_round(state, True, 10.0)
    assert (state.consecutive_empty, state.interval_ms) == (0, 100)
    assert state.last_query == 10.0


def test_reset_returns_to_base_and_is_due_at_once() -> None:
    policy = BackoffPolicy()
    state = policy.new_state(0.0)
    for n in range(3):
        policy.after_round(state, False, float(n))
    assert not state.is_due(2.5)
    policy.reset(state)
    assert (state.consecutive_empty, state.interval_ms, state.last_query) == (0, 100, None)
    assert state.is_due(2.0)


def test_threshold_three_and_multiplier_one_and_a_half() -> None:
    seen = _intervals_after_empty_rounds(BackoffPolicy(threshold=3, multiplier=1.5), 11)
    # Two empty rounds are tolerated; then x1.5, truncated to whole ms, capped at 2000.
    assert seen == [100, 100, 100, 150, 225, 337, 505, 757, 1135, 1702, 2000, 2000]


def test_custom_base_and_cap() -> None:
    seen = _intervals_after_empty_rounds(BackoffPolicy(base_ms=50, max_ms=300), 4)
    assert seen == [50, 100, 200, 300, 300]


def test_due_exactly_when_the_interval_has_passed() -> None:
    state = BackoffState(consecutive_empty=1, interval_ms=200, last_query=10.0)
    assert not state.is_due(10.199)
    assert state.is_due(10.2)
    assert state.due_at() == pytest.approx(10.2)


def test_new_state_is_due_immediately() -> None:
    state = BackoffPolicy().new_state(5.0)
    assert state.due_at() == -math.inf
    assert state.is_due(5.0)


@pytest.mark.parametrize(
    "kwargs",
    [{"base_ms": 0}, {"threshold": -1}, {"multiplier": 0.5}, {"base_ms": 500, "max_ms": 100}],
)
def test_invalid_policies_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        BackoffPolicy(**kwargs)  # type: ignore[arg-type]
