from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from queen_threads.errors import DatabaseUnavailable
from queen_threads.queue.push_batcher import PushBatcher

Items = list[dict[str, Any]]


class GatedStore:
    """A push function whose first call blocks until released, recording every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.fail: Exception | None = None
        self.reject: str | None = None

    def push(self, items: Items) -> Items:
        self.calls.append([i["tid"] for i in items])
        self.entered.set()
        self.gate.wait(5)
        if self.fail is not None:
            raise self.fail
        if self.reject and any(i["tid"] == self.reject for i in items):
            raise ValueError("bad row")
        return [
            {"index": n, "transactionId": i["tid"], "status": "queued"} for n, i in enumerate(items)
        ]


def items(*tids: str, partition: str = "P") -> Items:
    return [{"tid": t, "queue": "q", "partition": partition} for t in tids]


def wait_pending(batcher: PushBatcher, count: int, timeout: float = 5.0) -> None:
    """Until `count` requests wait in the batcher (fails instead of hanging)."""
    deadline = time.monotonic() + timeout
    while len(batcher._pending) < count:
        assert time.monotonic() < deadline, f"{len(batcher._pending)} of {count} waiting"
        threading.Event().wait(0.001)


def run_concurrently(batcher: PushBatcher, store: GatedStore, requests: list[Items]) -> list[Any]:
    out: list[Any] = [None] * len(requests)

    def call(n: int) -> None:
        try:
            out[n] = batcher.push(requests[n])
        except Exception as exc:
            out[n] = exc

    first = threading.Thread(target=call, args=(0,))
    first.start()
    assert store.entered.wait(5)
    others = [threading.Thread(target=call, args=(n,)) for n in range(1, len(requests))]
    for t in others:
        t.start()
    wait_pending(batcher, len(others))  # all queued behind the call in flight
    store.gate.set()
    for t in [first, *others]:
        t.join(5)
    return out


def test_lone_request_goes_at_once() -> None:
    store = GatedStore()
    store.gate.set()
    batcher = PushBatcher(store.push)
    assert [r["transactionId"] for r in batcher.push(items("a", "b"))] == ["a", "b"]
    assert store.calls == [["a", "b"]]


def test_requests_arriving_during_a_call_share_the_next_one() -> None:
    store = GatedStore()
    batcher = PushBatcher(store.push, max_concurrent=1)
    out = run_concurrently(batcher, store, [items("a"), items("b", "c"), items("d")])
    assert store.calls[0] == ["a"]
    assert len(store.calls) == 2 and sorted(store.calls[1]) == ["b", "c", "d"]
    assert [r["transactionId"] for r in out[1]] == ["b", "c"]
    assert [r["index"] for r in out[1]] == [0, 1], "indexes are per request"
    assert [r["transactionId"] for r in out[2]] == ["d"]


def test_a_request_is_never_split_and_max_items_bounds_a_call() -> None:
    store = GatedStore()
    batcher = PushBatcher(store.push, max_items=3, max_concurrent=1)
    run_concurrently(batcher, store, [items("a"), items("b", "c"), items("d", "e")])
    assert store.calls[0] == ["a"]
    assert sorted(map(tuple, store.calls[1:])) == [("b", "c"), ("d", "e")]


def test_unavailable_database_fails_every_request_of_the_call() -> None:
    store = GatedStore()
    store.gate.set()
    store.fail = DatabaseUnavailable("down")
    with pytest.raises(DatabaseUnavailable):
        PushBatcher(store.push).push(items("a"))


def test_one_bad_request_does_not_fail_the_others() -> None:
    store = GatedStore()
    store.reject = "bad"
    batcher = PushBatcher(store.push, max_concurrent=1)
    out = run_concurrently(batcher, store, [items("a"), items("bad"), items("ok")])
    assert isinstance(out[1], ValueError)
    assert [r["transactionId"] for r in out[2]] == ["ok"]


def test_two_calls_for_different_partitions_in_flight_by_default() -> None:
    calls_in_flight = threading.Semaphore(0)
    release = threading.Event()
    seen: list[list[str]] = []

    def push(batch: Items) -> Items:
        seen.append([i["tid"] for i in batch])
        calls_in_flight.release()
        release.wait(5)
        return [{"transactionId": i["tid"]} for i in batch]

    batcher = PushBatcher(push)
    requests = [items(t, partition=t) for t in ("a", "b", "c")]
    threads = [threading.Thread(target=batcher.push, args=(r,)) for r in requests]
    for t in threads:
        t.start()
    assert calls_in_flight.acquire(timeout=5) and calls_in_flight.acquire(timeout=5)
    assert len(seen) == 2 and all(len(call) == 1 for call in seen), "two leaders at once"
    release.set()
    for t in threads:
        t.join(5)
    assert sorted(x for call in seen for x in call) == ["a", "b", "c"]


def test_calls_never_overlap_on_a_partition() -> None:
    """The database serialises pushes to one partition: a second call would only wait for
    the first one's lock; the requests wait here and share the next call instead."""
    store = GatedStore()
    batcher = PushBatcher(store.push)  # two calls may run, but not for one partition
    out = run_concurrently(batcher, store, [items("a"), items("b"), items("c")])
    assert store.calls == [["a"], ["b", "c"]]
    assert [r["transactionId"] for r in out[2]] == ["c"]


def test_without_across_a_call_carries_only_the_leaders_partition() -> None:
    """On Citus a call of one partition is delegated to its node: requests for other
    partitions wait for calls of their own instead of joining (one at a time here)."""
    store = GatedStore()
    batcher = PushBatcher(store.push, max_concurrent=1, across=lambda: False)
    requests = [items("a", partition="A"), items("b", partition="B"),
                items("a2", partition="A"), items("b2", partition="B")]  # fmt: skip
    out = run_concurrently(batcher, store, requests)
    # after "a": B's two requests share a call, A's second one goes alone
    assert store.calls[0] == ["a"] and len(store.calls) == 3, store.calls
    assert all(len({tid[0] for tid in call}) == 1 for call in store.calls), store.calls
    assert sorted(t for call in store.calls for t in call) == ["a", "a2", "b", "b2"]
    assert [r["transactionId"] for r in out[3]] == ["b2"]


def test_a_request_waits_behind_an_older_one_sharing_a_partition() -> None:
    """First come, first served per partition: a later small request to a partition an
    older waiting request also needs does not jump ahead of it."""
    order: list[list[str]] = []
    entered, release = threading.Event(), threading.Event()

    def push(batch: Items) -> Items:
        order.append([i["tid"] for i in batch])
        if batch[0]["tid"] == "x":  # the first call holds partition A until released
            entered.set()
            release.wait(5)
        return [{"transactionId": i["tid"]} for i in batch]

    batcher = PushBatcher(push, max_concurrent=2)
    first = threading.Thread(target=batcher.push, args=(items("x", partition="A"),))
    first.start()
    assert entered.wait(5)
    # waits for A (held by x), and also needs B
    both = [{"tid": "ab", "queue": "q", "partition": p} for p in ("A", "B")]
    t_both = threading.Thread(target=batcher.push, args=(both,))
    t_both.start()
    wait_pending(batcher, 1)
    # B is free, but the older waiting request wants it: this one must not start first
    t_b = threading.Thread(target=batcher.push, args=(items("b", partition="B"),))
    t_b.start()
    wait_pending(batcher, 2)
    assert order == [["x"]], "nothing else may start while A is held"
    release.set()
    for t in (first, t_both, t_b):
        t.join(5)
    assert order[0] == ["x"] and order[1][0] == "ab", order
