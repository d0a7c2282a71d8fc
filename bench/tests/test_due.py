"""scripts/bench (w) retry redelivery lateness: its registration, sizes and figures."""

from __future__ import annotations

from bench.due import due_figures, epoch_s
from bench.options import FULL, QUICK, parse_args
from bench.scenarios import SCENARIOS


def test_the_scenario_is_registered_on_request_only() -> None:
    assert SCENARIOS["w"].run.__name__ == "retry_lateness"
    assert "w" not in parse_args([]).scenarios
    assert parse_args(["--scenarios", "w"]).scenarios == ("w",)


def test_sizes_and_figures() -> None:
    assert (FULL.due_queues, FULL.due_rounds, FULL.due_delay_ms) == (10, 50, 200)
    assert QUICK.due_rounds < FULL.due_rounds
    keys = [f.key for f in due_figures(FULL)]
    assert keys == ["late_p50_ms", "late_p99_ms", "late_max_ms", "late_50ms"]
    assert "10 queues x 50 retries of 200 ms" in due_figures(FULL)[0].label
    assert epoch_s("1970-01-01T00:00:02.250Z") == 2.25
