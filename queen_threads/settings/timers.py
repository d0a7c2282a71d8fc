"""Timers (docs/timers.md): how the firer claims, sleeps and keeps its log."""

from __future__ import annotations

from dataclasses import dataclass

from queen_threads.settings.parsers import env, integer


@dataclass(frozen=True)
class TimerSettings:
    """The timer firer of each process and the retention of fired timers."""

    timers_fire_batch: int = env(
        "TIMERS_FIRE_BATCH",
        500,
        integer(1, 10000),
        "Due timers one fire call claims and delivers (one transaction).",
    )
    timers_max_sleep_ms: int = env(
        "TIMERS_MAX_SLEEP_MS",
        1000,
        integer(10, 60000),
        "Longest a process's timer firer sleeps without a known due time, ms.",
    )
    timers_fired_retention_hours: int = env(
        "TIMERS_FIRED_RETENTION_HOURS",
        24,
        integer(1),
        "Keep the log of fired timers (queen.timer_fires) this many hours.",
    )
