"""The gates of waiting ephemeral pops: what opens them, without a database."""

from __future__ import annotations

import threading
from typing import Any

from queen_threads.ephemeral.gates import Gates


class Watch:
    """Answers what the test sets: {queue: [version, expired lease at]}."""

    def __init__(self) -> None:
        self.answer: dict[str, list[Any]] = {}
        self.asked: list[list[str]] = []

    def __call__(self, queues: list[str]) -> dict[str, list[Any]]:
        self.asked.append(queues)
        return {q: v for q, v in self.answer.items() if q in queues}


def waiting(gates: Gates, queue: str, version: int) -> tuple[threading.Event, threading.Thread]:
    """A pop that saw `version` and waits on the queue's gate; returns its gate and thread."""
    gate = gates.gate(queue)
    thread = threading.Thread(target=gates.wait, args=(queue, gate, version, 10.0))
    thread.start()
    while gates.waiting() == 0:
        threading.Event().wait(0.001)
    return gate, thread


def test_an_open_in_this_process_wakes_the_waiters_of_that_queue_only() -> None:
    gates = Gates(Watch(), interval_s=60)
    gate, thread = waiting(gates, "q", 0)
    other = gates.gate("other")
    gates.open("q")
    thread.join(5)
    assert gate.is_set() and not other.is_set()
    assert gates.gate("q") is not gate  # the next waiter gets a fresh gate


def test_a_gate_taken_before_the_pop_catches_an_open_before_the_wait() -> None:
    gates = Gates(Watch(), interval_s=60)
    gate = gates.gate("q")
    gates.open("q")  # a push between the empty pop and the wait
    assert gates.wait("q", gate, 0, 5.0)


def test_the_watcher_opens_when_the_version_moved_past_what_the_pop_saw() -> None:
    watch = Watch()
    gates = Gates(watch, interval_s=60)
    watch.answer = {"q": [5, None]}
    gate, thread = waiting(gates, "q", 5)
    gates.check()
    assert not gate.is_set()  # nothing new since the pop
    watch.answer = {"q": [6, None]}
    gates.check()
    thread.join(5)
    assert gate.is_set()


def test_the_first_look_already_counts_a_push_after_the_pop() -> None:
    watch = Watch()
    gates = Gates(watch, interval_s=60)
    watch.answer = {"q": [8, None]}  # pushed elsewhere after the pop saw 7
    gate, thread = waiting(gates, "q", 7)
    gates.check()
    thread.join(5)
    assert gate.is_set()


def test_an_expired_lease_opens_once() -> None:
    watch = Watch()
    gates = Gates(watch, interval_s=60)
    watch.answer = {"q": [1, 1_700_000_000_000]}
    gate, thread = waiting(gates, "q", 1)
    gates.check()
    thread.join(5)
    assert gate.is_set()
    second, thread2 = waiting(gates, "q", 1)
    gates.check()  # the same expired lease (another group's, say): no new wake-up
    assert not second.is_set()
    gates.open("q")
    thread2.join(5)


def test_only_queues_with_waiters_are_watched() -> None:
    watch = Watch()
    gates = Gates(watch, interval_s=60)
    gates.check()
    assert watch.asked == []
    _gate, thread = waiting(gates, "a", 0)
    gates.check()
    assert watch.asked == [["a"]]
    gates.open("a")
    thread.join(5)
    gates.check()
    assert watch.asked == [["a"]]
