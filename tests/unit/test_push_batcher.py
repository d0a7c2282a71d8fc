from __future__ import annotations

import threading
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


def items(*tids: str) -> Items:
    return [{"tid": t} for t in tids]


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
    while len(batcher._pending) < len(others):  # all queued behind the call in flight
        threading.Event().wait(0.001)
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


def test_two_calls_in_flight_by_default() -> None:
    calls_in_flight = threading.Semaphore(0)
    release = threading.Event()
    seen: list[list[str]] = []

    def push(batch: Items) -> Items:
        seen.append([i["tid"] for i in batch])
        calls_in_flight.release()
        release.wait(5)
        return [{"transactionId": i["tid"]} for i in batch]

    batcher = PushBatcher(push)
    threads = [threading.Thread(target=batcher.push, args=(items(t),)) for t in ("a", "b", "c")]
    for t in threads:
        t.start()
    assert calls_in_flight.acquire(timeout=5) and calls_in_flight.acquire(timeout=5)
    assert len(seen) == 2 and all(len(call) == 1 for call in seen), "two leaders at once"
    release.set()
    for t in threads:
        t.join(5)
    assert sorted(x for call in seen for x in call) == ["a", "b", "c"]
