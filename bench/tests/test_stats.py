"""scripts/bench statistics: percentiles, medians, run summaries."""

from __future__ import annotations

import math

import pytest

from bench.stats import Summary, median, percentile, rate


def test_percentile_interpolates_like_numpy_linear() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 10.0
    assert percentile(values, 50) == pytest.approx(5.5)
    assert percentile(values, 95) == pytest.approx(9.55)
    assert percentile(values, 99) == pytest.approx(9.91)


def test_percentile_ignores_input_order_and_handles_one_value() -> None:
    assert percentile([30.0, 10.0, 20.0], 50) == 20.0
    assert percentile([7.0], 99) == 7.0


@pytest.mark.parametrize("p", [-1, 100.5])
def test_percentile_rejects_out_of_range(p: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0], p)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)


def test_median_of_even_and_odd_counts() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5


def test_summary_is_median_and_spread_of_runs() -> None:
    s = Summary.of([17_500, 16_000, 18_200])
    assert (s.median, s.low, s.high, s.runs) == (17_500, 16_000, 18_200, 3)
    assert s.as_dict() == {"median": 17_500, "min": 16_000, "max": 18_200, "runs": 3}


def test_summary_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        Summary.of([])


def test_rate_guards_zero_time() -> None:
    assert rate(1000, 0.5) == 2000
    assert rate(10, 0) == 0.0
    assert not math.isnan(rate(0, 0))
