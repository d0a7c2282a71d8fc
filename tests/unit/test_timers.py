"""The timers room without a database: op checks, the firer's schedule and the
announcements' coalescing."""

from __future__ import annotations

import base64
import threading
from typing import Any

import orjson
import pytest

from queen_threads.timers import body as ops
from queen_threads.timers.announcer import Announcer
from queen_threads.timers.body import TimerRequestInvalid
from queen_threads.timers.firer import Firer


def op(**fields: Any) -> dict[str, Any]:
    base = {"op": "schedule", "queue": "q", "timerKey": "k", "delayMs": 5,
            "payload": base64.b64encode(orjson.dumps({"a": 1})).decode()}  # fmt: skip
    return {**base, **fields}


def test_a_schedule_is_normalised_with_its_producer_and_a_minted_txn() -> None:
    [clean] = ops.operations([op(extra="ignored")], "alice")
    assert clean["payload"] == {"a": 1} and clean["producerSub"] == "alice"
    assert clean["partition"] == "Default" and clean["txn"] and "extra" not in clean
    [cancel] = ops.operations([{"op": "cancel", "queue": "q", "timerKey": "a/b"}], None)
    assert cancel == {"op": "cancel", "queue": "q", "timerKey": "a/b", "txn": None}


@pytest.mark.parametrize(
    "bad",
    [op(op="later"), op(queue="a b"), op(timerKey=""), op(timerKey="a\x00b"),
     op(timerKey="x" * (ops.MAX_KEY + 1)), op(payload="***"), op(payload=5),
     op(delayMs=None), op(delayMs=float("nan")), op(delayMs=False), op(messageId="1"),
     op(_private=1), op(payloadZstd=True), op(txn=""), op(partition="a b")],
)  # fmt: skip
def test_a_bad_op_is_refused_with_its_index(bad: dict[str, Any]) -> None:
    with pytest.raises(TimerRequestInvalid, match=r"operations\[1\]") as info:
        ops.operations([op(timerKey="fine"), bad], None)
    assert info.value.code == "timers_bad_request" and info.value.reason


def test_a_key_may_appear_once_per_call_but_in_two_queues() -> None:
    assert len(ops.operations([op(), op(queue="r")], None)) == 2
    with pytest.raises(TimerRequestInvalid, match="at most once") as info:
        ops.operations([op(), op(op="cancel")], None)
    assert info.value.reason == "duplicate_key"
    with pytest.raises(TimerRequestInvalid, match="non-empty"):
        ops.operations([], None)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_firer_plans_its_next_cycle_from_the_answer_and_from_wake_ins() -> None:
    clock = FakeClock()
    answers = [{"fired": 2, "nextInMs": 3000, "epoch": 1}, {"more": True}]
    seen: list[dict[str, Any]] = []
    firer = Firer(lambda limit: answers.pop(0), seen.append, batch=10, max_sleep_s=1.0,
                  clock=clock)  # fmt: skip
    firer._due = clock.now + 1.0  # as after a cycle: the max sleep
    firer.cycle()
    assert seen[0]["fired"] == 2 and firer.fired == 2
    assert firer._due == pytest.approx(clock.now + 1.0, abs=0.01)  # 3 s > max sleep
    firer.wake_in(0.2)
    assert firer._due == pytest.approx(clock.now + 0.2, abs=0.01)
    firer.wake_in(0.5)  # later than planned: no change
    assert firer._due == pytest.approx(clock.now + 0.2, abs=0.01)
    firer.cycle()  # a full batch: the next cycle at once
    assert firer._due == pytest.approx(clock.now, abs=0.01)


def test_a_failed_fire_is_counted_and_retried_after_the_max_sleep() -> None:
    def broken(limit: int) -> dict[str, Any]:
        raise RuntimeError("database away")

    firer = Firer(broken, lambda a: None, batch=1, max_sleep_s=0.5)
    assert firer.cycle() is None and firer.errors == 1
    assert firer.last_error is not None and firer.last_error.endswith("database away")


def test_the_firer_thread_fires_at_once_then_when_woken() -> None:
    calls = threading.Semaphore(0)

    def fire(limit: int) -> dict[str, Any]:
        calls.release()
        return {}

    firer = Firer(fire, lambda a: None, batch=1, max_sleep_s=30.0)
    firer.start()
    try:
        assert calls.acquire(timeout=5), "no first cycle"
        firer.wake_in(0.0)
        assert calls.acquire(timeout=5), "a wake-in did not start a cycle"
    finally:
        firer.stop()


def test_announcements_go_out_only_for_a_timer_sooner_than_every_one_ahead() -> None:
    clock = FakeClock()
    sent: list[dict[str, Any]] = []
    announcer = Announcer(sent.append, "me", clock=clock)
    announcer.due_in(0.01)  # due at once: left to this process's firer
    assert announcer._pending is None
    announcer.due_in(5.0)
    assert announcer._take() == pytest.approx(105.0)
    announcer.due_in(6.0)  # after the one announced: nothing to say
    assert announcer._pending is None
    announcer.due_in(2.0)
    announcer.due_in(3.0)
    assert announcer._pending == pytest.approx(102.0)
    clock.now = 200.0  # everything announced is behind us
    announcer.due_in(9.0)
    assert announcer._pending == pytest.approx(102.0)  # the sooner one still goes first
