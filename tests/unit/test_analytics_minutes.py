"""The in-memory side of the analytics: counts per (queue, minute), this process's figures
per minute, and the choice of a chart's bucket size (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from queen_threads.errors import ValidationError
from queen_threads.http.buckets import Window, choose_interval, points
from queen_threads.metrics import minutes as m
from queen_threads.metrics.minutes import ProcessMinutes, ProcessSample, QueueMinutes

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC).timestamp()


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_counts_per_queue_and_minute_and_drain_empties() -> None:
    clock = Clock(T0 + 5)
    acc = QueueMinutes(clock)
    acc.add("pushed", ["a", "a", "b", ""])
    acc.add("popped", ["a"])
    clock.now = T0 + 65
    acc.add("pushed", ["a"])
    assert acc.drain() == [
        {"queue": "a", "minute": "2025-06-01T10:00:00Z", "pushed": 2, "popped": 1},
        {"queue": "a", "minute": "2025-06-01T10:01:00Z", "pushed": 1},
        {"queue": "b", "minute": "2025-06-01T10:00:00Z", "pushed": 1},
    ]
    assert acc.drain() == []


def test_ack_statuses_map_to_acked_failed_and_dlq() -> None:
    acc = QueueMinutes(Clock())
    acc.add_acks([
        ("q", "completed"), ("q", "completed"), ("q", "failed_retry"), ("q", "retry"),
        ("q", "failed_dlq"), ("q", "already_acked"), ("q", "rejected"),
    ])  # fmt: skip
    [row] = acc.drain()
    assert row == {"queue": "q", "minute": "2025-06-01T10:00:00Z", "acked": 2, "failed": 2,
                   "dlq": 1}  # fmt: skip


def test_an_unknown_event_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown analytics event"):
        QueueMinutes(Clock()).add("lost", ["q"])


def test_restore_merges_a_failed_flush_with_what_came_since() -> None:
    clock = Clock()
    acc = QueueMinutes(clock)
    acc.add("pushed", ["q", "q"])
    drained = acc.drain()
    acc.add("pushed", ["q"])
    acc.add("dlq", ["q"])
    acc.restore(drained)
    assert acc.drain() == [
        {"queue": "q", "minute": "2025-06-01T10:00:00Z", "pushed": 3, "dlq": 1},
    ]


def test_restore_keeps_at_most_the_newest_pending_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(m, "MAX_PENDING_MINUTES", 3)
    acc = QueueMinutes(Clock())
    rows = [{"queue": "q", "minute": m.iso_minute(int(T0) + 60 * i), "pushed": 1} for i in range(5)]
    acc.restore(rows)
    assert [r["minute"][11:16] for r in acc.drain()] == ["10:02", "10:03", "10:04"]


def sample(cpu: float, requests: int, rss: int = 100, polls: int = 0) -> ProcessSample:
    return ProcessSample(cpu_seconds=cpu, rss_bytes=rss, http_requests=requests, http_active=2,
                         pool_in_use=1, pool_size=10, pool_waiting=0, long_polls=polls)  # fmt: skip


def test_process_minutes_add_deltas_and_keep_the_largest_levels() -> None:
    clock = Clock(T0)
    acc = ProcessMinutes(clock)
    acc.sample(sample(cpu=10.0, requests=100, rss=300, polls=5))
    clock.now = T0 + 1
    acc.sample(sample(cpu=10.5, requests=130, rss=200, polls=7))
    clock.now = T0 + 2
    acc.sample(sample(cpu=10.6, requests=131, rss=250, polls=1))
    [row] = acc.drain()
    assert row["minute"] == "2025-06-01T10:00:00Z"
    assert row["wallSeconds"] == pytest.approx(2.0)
    assert row["cpuSeconds"] == pytest.approx(0.6)
    assert row["httpRequests"] == 31
    assert (row["rssBytes"], row["longPolls"], row["poolSize"]) == (300, 7, 10)
    # The next minute starts from the last sample, not from zero.
    clock.now = T0 + 61
    acc.sample(sample(cpu=11.0, requests=141))
    [row] = acc.drain()
    assert row["minute"] == "2025-06-01T10:01:00Z" and row["httpRequests"] == 10


def test_process_restore_adds_and_keeps_the_largest() -> None:
    clock = Clock(T0)
    acc = ProcessMinutes(clock)
    acc.sample(sample(cpu=1.0, requests=0, rss=500))
    clock.now = T0 + 1
    acc.sample(sample(cpu=2.0, requests=5, rss=100))
    failed = acc.drain()
    clock.now = T0 + 2
    acc.sample(sample(cpu=2.5, requests=6, rss=100))
    acc.restore(failed)
    [row] = acc.drain()
    assert row["cpuSeconds"] == pytest.approx(1.5) and row["httpRequests"] == 6
    assert row["rssBytes"] == 500


def at(hours: float) -> datetime:
    return datetime(2025, 6, 1, tzinfo=UTC) + timedelta(hours=hours)


@pytest.mark.parametrize(
    ("hours", "expected"),
    [(1, "1m"), (8, "1m"), (9, "5m"), (24, "5m"), (24 * 7, "30m"), (24 * 30, "3h"),
     (24 * 366, "1d")],
)  # fmt: skip
def test_auto_takes_the_smallest_interval_within_500_points(hours: float, expected: str) -> None:
    name, step = choose_interval(at(0), at(hours), None)
    assert name == expected
    assert points(at(0), at(hours), step) <= 500


def test_explicit_intervals_aliases_and_refusals() -> None:
    assert choose_interval(at(0), at(1), "minute") == ("1m", 60)
    assert choose_interval(at(0), at(48), "hour") == ("1h", 3600)
    assert choose_interval(at(0), at(24 * 7), "1m") == ("1m", 60)  # 10,080 points: allowed
    with pytest.raises(ValidationError, match="interval must be one of"):
        choose_interval(at(0), at(1), "2m")
    with pytest.raises(ValidationError, match="more than 10080 points"):
        choose_interval(at(0), at(24 * 8), "1m")


def test_points_count_the_partial_first_and_last_buckets() -> None:
    assert points(at(0.5), at(2.25), 3600) == 3  # 00:00, 01:00, 02:00
    assert points(at(1), at(1), 60) == 0


def test_the_window_reads_whole_buckets_from_the_one_holding_from() -> None:
    w = Window(at(0.5), at(2.25), "1h", 3600)
    assert w.first_bucket == at(0)
    assert w.params() == {"from_ts": at(0), "to_ts": at(2.25), "step_s": 3600}
    assert w.frame()["from"] == "2025-06-01T00:30:00.000Z"  # the answer names what was asked
