"""scripts/bench (t) timer fire lateness: the plan of due times and the options."""

from __future__ import annotations

import random

from bench.options import FULL, QUICK, parse_args
from bench.scenarios import SCENARIOS
from bench.timers import epoch_s, plan, timer_figures


def test_the_plan_spreads_every_timer_over_the_window_after_the_lead() -> None:
    delays = plan(1000, 5.0, 60.0, random.Random(1))
    assert len(delays) == 1000 and delays == sorted(delays)
    assert delays[0] >= 5000 and delays[-1] < 65000
    assert delays[-1] - delays[0] > 55_000  # spread over the window, not bunched


def test_sizes_and_flags() -> None:
    assert (FULL.timer_count, FULL.timer_spread_s) == (10_000, 60.0)
    assert QUICK.timer_count < FULL.timer_count
    o = parse_args(["--quick", "--scenarios", "t", "--timer-count", "50", "--timer-spread", "2"])
    assert o.scenarios == ("t",) and (o.sizes.timer_count, o.sizes.timer_spread_s) == (50, 2.0)
    assert "t" not in parse_args([]).scenarios  # on request only


def test_the_scenario_is_registered_with_its_figures() -> None:
    scenario = SCENARIOS["t"]
    keys = {f.key for f in timer_figures(FULL)}
    assert {"fire_p50_ms", "fire_p99_ms", "missing"} <= keys
    assert scenario.figures is timer_figures and "10,000 timers" in timer_figures(FULL)[0].label
    assert epoch_s("1970-01-01T00:00:01.500000Z") == 1.5
