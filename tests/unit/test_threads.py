"""queen_threads/threads.py: the thread the firer, the announcer and the wake notifier
share: it runs its owner's loop, and stop() wakes a loop waiting on the condition and
joins it."""

from __future__ import annotations

import threading

from queen_threads.threads import SignalledThread


def test_stop_wakes_the_waiting_loop_and_joins_it() -> None:
    woken: list[str] = []
    waiting = threading.Event()

    def run() -> None:
        with loop.cond:
            waiting.set()
            while not loop.stopping:
                loop.cond.wait()  # no timeout: only stop() ends this
        woken.append("stopped")

    loop = SignalledThread("test-loop", run)
    assert not loop.alive()
    loop.start()
    assert waiting.wait(5) and loop.alive()
    loop.stop(timeout_s=5)
    assert woken == ["stopped"] and not loop.alive()


def test_work_notified_under_the_condition_reaches_the_loop() -> None:
    work: list[int] = []
    done: list[int] = []

    def run() -> None:
        while True:
            with loop.cond:
                while not work and not loop.stopping:
                    loop.cond.wait()
                if not work:
                    return
                done.append(work.pop())

    loop = SignalledThread("test-loop", run)
    loop.start()
    for n in range(3):
        with loop.cond:
            work.append(n)
            loop.cond.notify()
    loop.stop(timeout_s=5)
    assert sorted(done) == [0, 1, 2] and not loop.alive()


def test_stop_before_start_is_harmless() -> None:
    loop = SignalledThread("never-started", lambda: None)
    loop.stop(timeout_s=0.1)
    assert loop.stopping and not loop.alive()
