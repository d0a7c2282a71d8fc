"""ResponseQueue: one answer per waiting request, nothing lost when the waiter leaves."""

from __future__ import annotations

import threading

import pytest

from queen_threads.polling import Response, ResponseQueue, ResponseQueues


def test_post_then_wait_returns_and_closes_the_slot() -> None:
    queue = ResponseQueue()
    queue.open("r1")
    assert queue.post("r1", 200, b"{}", ["lease-1"])
    assert queue.wait("r1", 0) == Response(200, b"{}", ("lease-1",))
    assert "r1" not in queue and len(queue) == 0


def test_wait_times_out_and_keeps_the_slot() -> None:
    queue = ResponseQueue()
    queue.open("r1")
    assert queue.wait("r1", 0) is None
    assert "r1" in queue


def test_wait_without_a_slot_returns_at_once() -> None:
    assert ResponseQueue().wait("nobody", None) is None


def test_second_post_is_refused() -> None:
    queue = ResponseQueue()
    queue.open("r1")
    assert queue.post("r1", 204, None, [])
    assert not queue.post("r1", 200, b"x", ["lease-2"])
    assert queue.wait("r1", 0) == Response(204, None, ())


def test_post_after_abandon_is_refused() -> None:
    queue = ResponseQueue()
    queue.open("r1")
    assert queue.abandon("r1") is None
    assert not queue.post("r1", 200, b"x", ["lease-1"])


def test_abandon_returns_a_response_posted_meanwhile() -> None:
    queue = ResponseQueue()
    queue.open("r1")
    queue.post("r1", 200, b"x", ["lease-1"])
    late = queue.abandon("r1")
    assert late is not None and late.lease_ids == ("lease-1",)
    assert queue.abandon("r1") is None


def test_duplicate_open_is_an_error() -> None:
    queue = ResponseQueue()
    queue.open("r1")
    with pytest.raises(ValueError):
        queue.open("r1")


def test_waiter_on_another_thread_is_woken_by_post() -> None:
    queue = ResponseQueue()
    queue.open("r1")
    got: list[Response | None] = []
    waiting = threading.Thread(target=lambda: got.append(queue.wait("r1", 10.0)))
    waiting.start()
    assert queue.post("r1", 200, b"m", ["lease-1"])
    waiting.join(10.0)
    assert got == [Response(200, b"m", ("lease-1",))]


def test_queues_by_worker_id() -> None:
    queues = ResponseQueues()
    assert not queues.post(3, "r1", 204, None, [])  # no such worker
    queue = queues.queue_for(3)
    assert queues.queue_for(3) is queue and queues.get(3) is queue
    assert queue.worker_id == 3
    queue.open("r1")
    assert queues.post(3, "r1", 204, None, [])
    assert queues.get(4) is None
