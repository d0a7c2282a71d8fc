"""DelayedWakeups (a retry's wait ends, its long polls are woken) and how PollingService
routes a freed partition that carries `delayMs`. Timing by a manual clock, or by events
with generous timeouts on the real thread; never by sleeping."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from queen_threads.polling import DelayedWakeups, ManualClock
from queen_threads.queue.polling import PollingService
from queen_threads.settings import load_settings

WAIT_S = 10.0


def event(name: str) -> dict[str, Any]:
    return {"kind": "free", "queue": name}


def test_events_come_due_in_time_order_never_early() -> None:
    clock = ManualClock(0.0)
    fired: list[str] = []
    delayed = DelayedWakeups(lambda e: fired.append(e["queue"]), clock=clock)
    for name, delay_s in (("c", 0.3), ("a", 0.1), ("b", 0.2), ("b2", 0.2), ("now", -1)):
        assert delayed.schedule(delay_s, event(name))
    assert delayed.run_once() == 1 and fired == ["now"], "a negative delay is due at once"
    clock.advance(0.099)
    assert delayed.run_once() == 0 and fired == ["now"]
    clock.advance(0.001)
    delayed.run_once()
    assert fired == ["now", "a"]
    clock.advance(0.25)
    delayed.run_once()
    assert fired == ["now", "a", "b", "b2", "c"], "ties keep their scheduling order"
    assert delayed.stats() == {"pending": 0, "scheduled": 5, "fired": 5, "dropped": 0}


def test_full_or_stopped_drops_and_counts() -> None:
    delayed = DelayedWakeups(lambda e: None, capacity=2, clock=ManualClock())
    assert delayed.schedule(1, event("a")) and delayed.schedule(1, event("b"))
    assert delayed.schedule(1, event("c")) is False
    assert delayed.stop() is True
    assert delayed.schedule(1, event("d")) is False
    assert delayed.stats() == {"pending": 0, "scheduled": 2, "fired": 0, "dropped": 2}
    with pytest.raises(ValueError):
        DelayedWakeups(lambda e: None, capacity=0)


def test_a_failing_wakeup_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(0.0)
    fired: list[str] = []

    def fire(e: dict[str, Any]) -> None:
        if e["queue"] == "bad":
            raise RuntimeError("boom")
        fired.append(e["queue"])

    delayed = DelayedWakeups(fire, clock=clock)
    delayed.schedule(0.1, event("bad"))
    delayed.schedule(0.2, event("good"))
    clock.advance(1)
    assert delayed.run_once() == 2
    assert fired == ["good"] and "delayed wake-up failed" in caplog.text


def test_thread_fires_at_the_due_time_and_an_earlier_event_interrupts_its_sleep() -> None:
    got: dict[str, float] = {}
    done = threading.Event()

    def fire(e: dict[str, Any]) -> None:
        got[e["queue"]] = time.monotonic()
        done.set()

    delayed = DelayedWakeups(fire)
    delayed.start()
    try:
        delayed.schedule(3600, event("later"))  # the thread now sleeps an hour...
        start = time.monotonic()
        delayed.schedule(0.05, event("soon"))  # ...until this one wakes it
        assert done.wait(WAIT_S)
        assert list(got) == ["soon"]
        assert got["soon"] - start >= 0.05, "never before its time"
        assert delayed.pending() == 1
    finally:
        assert delayed.stop() is True
    assert delayed.pending() == 0


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str | None, str]] = []
        self.called = threading.Event()

    def __call__(
        self,
        queue: str,
        partition: str | None = None,
        group: str | None = None,
        *,
        namespace: str | None = None,
        task: str | None = None,
        source: str = "push",
    ) -> set[int]:
        self.calls.append((queue, partition, group, source))
        self.called.set()
        return set()


@pytest.fixture
def service(tmp_path: Any) -> PollingService:
    settings = load_settings({"FILE_BUFFER_DIR": str(tmp_path)}, dotenv_path=None)
    svc = PollingService(settings, store=None, worker_id=1)  # type: ignore[arg-type]
    return svc


def test_a_freed_partition_with_a_retry_wait_is_woken_when_it_ends(
    service: PollingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    notify = Recorder()
    monkeypatch.setattr(service.pool, "notify", notify)
    free = {"kind": "free", "queue": "q", "partition": "P", "consumerGroup": "g"}

    service.on_event(free)  # no wait: at once
    assert notify.calls == [("q", "P", "g", "notify")]

    notify.calls.clear()
    notify.called.clear()
    service.delayed.start()
    try:
        start = time.monotonic()
        service.on_event({**free, "delayMs": 40})
        assert notify.calls == [], "not woken now: it would find nothing"
        assert notify.called.wait(WAIT_S)
        assert time.monotonic() - start >= 0.04
        assert notify.calls == [("q", "P", "g", "retry")]
    finally:
        service.delayed.stop()


@pytest.mark.parametrize("delay", [0, -5, None, "100", True])
def test_no_usable_wait_means_woken_at_once(
    service: PollingService, monkeypatch: pytest.MonkeyPatch, delay: Any
) -> None:
    notify = Recorder()
    monkeypatch.setattr(service.pool, "notify", notify)
    service.on_event({"kind": "free", "queue": "q", "delayMs": delay})
    assert [c[3] for c in notify.calls] == ["notify"]
    assert service.delayed.pending() == 0
