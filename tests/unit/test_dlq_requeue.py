"""The bulk-requeue driver without a database: chunk sizes, pacing, early stop, resume."""

from __future__ import annotations

from typing import Any, cast

from queen_threads.dlq.service import DlqRequeuer, RequeuePlan, Selection
from queen_threads.dlq.store import DlqStore
from queen_threads.polling.clock import ManualClock

QUEUE = Selection(queue="q")


class FakeStore:
    """Serves `available` messages spread over partitions p0, p1, ... (`per_partition` each)
    and records every chunk call with the clock's time."""

    def __init__(self, clock: ManualClock, available: int, per_partition: int = 1000) -> None:
        self.clock = clock
        self.available = available
        self.per_partition = per_partition
        self.taken = 0
        self.calls: list[tuple[float, int, str | None]] = []

    def dlq_requeue_preview(self, selection: dict[str, Any], sample: int) -> dict[str, Any]:
        return {"matched": self.available, "partitions": 1, "sample": [{"n": 1}][:sample]}

    def dlq_requeue_chunk(
        self, selection: dict[str, Any], limit: int, from_partition: str | None
    ) -> dict[str, Any]:
        self.calls.append((self.clock(), limit, from_partition))
        got = min(limit, self.available - self.taken)
        parts = sorted({f"p{i // self.per_partition}" for i in range(self.taken, self.taken + got)})
        self.taken += got
        self.clock.advance(0.1)  # each chunk takes 100 ms
        last = f"p{max(self.taken - 1, 0) // self.per_partition}"
        return {"requeued": got, "partitions": parts, "lastPartitionId": last}


def make(available: int, per_partition: int = 1000) -> tuple[DlqRequeuer, FakeStore, list[float]]:
    clock = ManualClock()
    store = FakeStore(clock, available, per_partition)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        clock.advance(seconds)

    return DlqRequeuer(cast(DlqStore, store), sleep, clock), store, sleeps


def test_unpaced_runs_in_chunks_of_500_without_waiting() -> None:
    requeuer, store, sleeps = make(1200, per_partition=400)
    answer = requeuer.run(RequeuePlan(QUEUE, limit=1000))
    assert [c[1] for c in store.calls] == [500, 500]
    assert (answer["requeued"], answer["partitions"], answer["matched"]) == (1000, 3, 1200)
    assert sleeps == []
    # the second chunk resumes at the partition where the first stopped
    assert [c[2] for c in store.calls] == [None, "p1"]


def test_per_second_chunks_start_a_second_apart() -> None:
    requeuer, store, sleeps = make(12)
    answer = requeuer.run(RequeuePlan(QUEUE, limit=1000, per_second=5))
    assert answer["requeued"] == 12
    starts = [c[0] - store.calls[0][0] for c in store.calls]
    assert [round(s, 6) for s in starts] == [0.0, 1.0, 2.0]
    assert [c[1] for c in store.calls] == [5, 5, 5]
    assert sleeps == [0.9, 0.9]  # the chunk's own 100 ms count towards the second
    assert answer["durationMs"] == 2100


def test_a_short_chunk_ends_the_run() -> None:
    requeuer, store, _ = make(7)
    assert requeuer.run(RequeuePlan(QUEUE, limit=1000, per_second=5))["requeued"] == 7
    assert len(store.calls) == 2


def test_limit_bounds_the_last_chunk() -> None:
    requeuer, store, _ = make(100)
    assert requeuer.run(RequeuePlan(QUEUE, limit=12, per_second=5))["requeued"] == 12
    assert [c[1] for c in store.calls] == [5, 5, 2]


def test_stop_ends_the_run_after_the_current_chunk() -> None:
    requeuer, store, sleeps = make(100)
    answer = requeuer.run(RequeuePlan(QUEUE, limit=100, per_second=5), stop=lambda: True)
    assert answer["requeued"] == 5 and len(store.calls) == 1 and sleeps == []


def test_dry_run_only_previews() -> None:
    requeuer, store, _ = make(100)
    answer = requeuer.run(RequeuePlan(QUEUE, limit=10, dry_run=True))
    assert store.calls == []
    assert (answer["dryRun"], answer["matched"], answer["requeued"]) == (True, 100, 0)
    assert answer["sample"] == [{"n": 1}]


def test_selection_knows_when_it_is_empty() -> None:
    assert Selection().is_empty()
    assert not Selection(error="x").is_empty()
    assert Selection(ids=(("p", "t"),)).as_json()["ids"] == [
        {"partitionId": "p", "transactionId": "t"}
    ]
