"""WakeTargets (wake/targets.py): the notifier's copy of the other processes' interest,
read again only when a push or ack saw a newer epoch or one of its rows ran out."""

from __future__ import annotations

from typing import Any

import pytest

from queen_threads.polling import ManualClock
from queen_threads.wake.targets import WakeTargets


class Rows:
    """What queen.wake_interest_read_v2 answers; counts the reads."""

    def __init__(self) -> None:
        self.answer: dict[str, Any] = {"epoch": 0, "queues": {}, "scopes": [], "ttlMs": None}
        self.reads: list[str] = []

    def __call__(self, origin: str) -> dict[str, Any]:
        self.reads.append(origin)
        return dict(self.answer)


class Epoch:
    def __init__(self) -> None:
        self.value = 0

    def __call__(self) -> int:
        return self.value


def events(*queues: str) -> list[dict[str, Any]]:
    return [{"kind": "push", "queue": queue, "partition": "P"} for queue in queues]


@pytest.fixture
def rows() -> Rows:
    return Rows()


@pytest.fixture
def epoch() -> Epoch:
    return Epoch()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(100.0)


@pytest.fixture
def targets(rows: Rows, epoch: Epoch, clock: ManualClock) -> WakeTargets:
    return WakeTargets(rows, "me", epoch, clock)


def test_nobody_waiting_keeps_nothing_and_reads_once(targets: WakeTargets, rows: Rows) -> None:
    assert targets.wanted(events("a", "b")) == []
    assert targets.wanted(events("c")) == []
    assert rows.reads == ["me"]


def test_a_newer_epoch_from_a_push_makes_it_read_again(
    targets: WakeTargets, rows: Rows, epoch: Epoch
) -> None:
    assert targets.wanted(events("a")) == []
    rows.answer = {"epoch": 1, "queues": {"a": ["other"]}, "scopes": [], "ttlMs": 60_000}
    assert targets.wanted(events("a")) == []  # nothing said the rows changed: the copy holds
    epoch.value = 1  # a push returned epoch 1
    assert targets.wanted(events("a", "b")) == events("a")
    assert len(rows.reads) == 2
    assert targets.wanted(events("a")) == events("a")
    assert len(rows.reads) == 2


def test_the_copy_is_read_again_when_its_first_row_runs_out(
    targets: WakeTargets, rows: Rows, clock: ManualClock
) -> None:
    rows.answer = {"epoch": 0, "queues": {"a": ["other"]}, "scopes": [], "ttlMs": 30_000}
    assert targets.wanted(events("a")) == events("a")
    clock.advance(29.9)
    targets.wanted(events("a"))
    assert len(rows.reads) == 1
    rows.answer = {"epoch": 0, "queues": {}, "scopes": [], "ttlMs": None}  # not renewed
    clock.advance(0.1)
    assert targets.wanted(events("a")) == []
    assert len(rows.reads) == 2


def test_a_scope_waited_for_elsewhere_sends_everything_to_the_database_to_match(
    targets: WakeTargets, rows: Rows
) -> None:
    rows.answer = {"epoch": 0, "queues": {}, "scopes": ["other"], "ttlMs": 60_000}
    assert targets.wanted(events("a", "b")) == events("a", "b")
