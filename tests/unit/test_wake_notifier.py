"""WakeNotifier: wake-ups for other processes, coalesced and sent after the commits."""

from __future__ import annotations

import threading
from typing import Any

from queen_threads.wake.notifier import MAX_PENDING, WakeNotifier


class GatedSend:
    """Records each call; the first one blocks until released (a call in flight)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = False

    def __call__(self, batch: dict[str, Any]) -> int:
        self.calls.append(batch)
        self.entered.set()
        self.release.wait(5)
        if self.fail:
            raise RuntimeError("database gone")
        return len(batch["events"])


def push(queue: str, partition: str = "P") -> dict[str, Any]:
    return {"kind": "push", "queue": queue, "partition": partition}


def test_events_made_during_a_call_go_together_in_the_next_and_duplicates_merge() -> None:
    send = GatedSend()
    notifier = WakeNotifier(send, origin="me")
    notifier.start()
    try:
        notifier(push("a"))
        assert send.entered.wait(5)
        for _ in range(3):
            notifier(push("b"))
        notifier(push("c"))
        notifier({"kind": "free", "queue": "b", "partition": "P", "consumerGroup": "g"})
        send.release.set()
    finally:
        notifier.stop()
    assert [c["events"] for c in send.calls] == [
        [push("a")],
        [push("b"), push("c"), {"kind": "free", "queue": "b", "partition": "P",
                                "consumerGroup": "g"}],
    ]  # fmt: skip
    assert {c["origin"] for c in send.calls} == {"me"}
    assert notifier.stats()["sent"] == 4


def test_a_failed_call_is_counted_and_the_loop_goes_on() -> None:
    send = GatedSend()
    send.release.set()
    send.fail = True
    notifier = WakeNotifier(send)
    notifier.flush([push("a"), push("b")])
    assert notifier.stats()["failed"] == 2
    send.fail = False
    notifier.flush([push("c")])
    assert notifier.stats()["sent"] == 1


def test_stop_sends_what_is_pending() -> None:
    send = GatedSend()
    send.release.set()
    notifier = WakeNotifier(send)
    notifier(push("late"))
    notifier.start()
    notifier.stop()
    assert [e for c in send.calls for e in c["events"]] == [push("late")]


def test_own_events_are_recognised_by_origin() -> None:
    notifier = WakeNotifier(GatedSend(), origin="me")
    assert notifier.is_own({"kind": "push", "origin": "me"})
    assert not notifier.is_own({"kind": "push", "origin": "other"})
    assert not notifier.is_own({"kind": "push"})  # sent by SQL (no server involved)


def test_pending_events_are_bounded() -> None:
    notifier = WakeNotifier(GatedSend())  # not started: nothing drains
    for n in range(MAX_PENDING + 5):
        notifier(push(f"q{n}"))
    assert notifier.stats()["pending"] == MAX_PENDING
    assert notifier.stats()["dropped"] == 5


def test_only_wanted_events_are_sent_and_none_wanted_means_no_call() -> None:
    send = GatedSend()
    send.release.set()
    notifier = WakeNotifier(
        send, origin="me", wanted=lambda events: [e for e in events if e["queue"] == "w"]
    )
    notifier.flush([push("x"), push("y")])
    assert send.calls == []
    notifier.flush([push("w"), push("x")])
    assert [e["queue"] for e in send.calls[0]["events"]] == ["w"]
    assert notifier.stats() | {"pending": 0} == {
        "calls": 1, "sent": 1, "unwanted": 3, "failed": 0, "dropped": 0, "pending": 0
    }  # fmt: skip


def test_a_filter_that_cannot_read_counts_the_events_as_failed() -> None:
    def broken(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raise ConnectionError("database gone")

    notifier = WakeNotifier(GatedSend(), origin="me", wanted=broken)
    notifier.flush([push("a"), push("b")])
    assert notifier.stats()["failed"] == 2


def test_under_load_events_pile_up_before_the_next_call_and_counts_add_up(
    monkeypatch: Any,
) -> None:
    """Two flushes close together mean load: the loop waits COALESCE_S before it takes
    again, so what comes meanwhile goes in one call (and the sibling wakes once); a
    push's count (linger's hint) adds up when its events merge."""
    from queen_threads.wake import notifier as module

    monkeypatch.setattr(module, "COALESCE_S", 0.5)  # room for this test's events, however slow
    flushed = [threading.Event(), threading.Event()]
    calls: list[list[dict[str, Any]]] = []

    def send(batch: dict[str, Any]) -> int:
        calls.append(batch["events"])
        flushed[min(len(calls), 2) - 1].set()
        return len(batch["events"])

    notifier = WakeNotifier(send)
    notifier.start()
    try:
        notifier(push("a"))
        assert flushed[0].wait(5)
        notifier(push("b"))
        assert flushed[1].wait(5)  # two flushes in quick succession: busy
        for queue in ("c", "d", "c"):
            notifier({**push(queue), "count": 2})
    finally:
        notifier.stop()
    assert calls[:2] == [[push("a")], [push("b")]]
    assert calls[2:] == [[{**push("c"), "count": 4}, {**push("d"), "count": 2}]]
