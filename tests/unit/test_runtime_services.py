"""The runtime's services: one ordered list, started in order and stopped in reverse (a
runtime that is never really started: every service is replaced by a recorder)."""

from __future__ import annotations

from pathlib import Path

from queen_threads.runtime import Runtime
from tests.support.routes import unstarted_runtime


class Recorder:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    def start(self) -> None:
        self.log.append(f"start {self.name}")

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")


def recorded(rt: Runtime) -> tuple[list[str], list[str]]:
    names = [f"{type(s).__name__}#{i}" for i, s in enumerate(rt.services)]
    log: list[str] = []
    rt.services = [Recorder(name, log) for name in names]
    return names, log


def test_every_service_starts_in_order_and_stops_in_reverse(tmp_path: Path) -> None:
    rt = unstarted_runtime(tmp_path)
    names, log = recorded(rt)
    assert len(names) > 10
    rt.start()
    rt.begin_shutdown()
    at_shutdown = len(log) - len(names)
    rt.stop()
    assert log == [f"start {n}" for n in names] + [f"stop {n}" for n in reversed(names)]
    # the poll workers stop first (waiting long polls are answered at once); the buffer,
    # the maintenance switches and the analytics collector only at worker exit
    assert log[len(names)].startswith("stop PollingService#")
    stopped_late = [entry.split()[1].split("#")[0] for entry in log[len(names) + at_shutdown :]]
    assert stopped_late == [
        "FileBuffer",
        "Maintenance",
        "AnalyticsCollector",
        "Authenticator",
    ]


def test_the_wake_listener_runs_only_with_listen_notify(tmp_path: Path) -> None:
    on = {type(s).__name__ for s in unstarted_runtime(tmp_path / "on").services}
    off = {
        type(s).__name__
        for s in unstarted_runtime(tmp_path / "off", QUEEN_LISTEN_NOTIFY="false").services
    }
    assert on - off == {"WakeupListener", "WakeInterest"}
