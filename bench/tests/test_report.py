"""scripts/bench output: number formatting and the markdown tables."""

from __future__ import annotations

import pytest

from bench.report import CpuRow, Row, cpu_table, format_number, results_table
from bench.stats import Summary


@pytest.mark.parametrize(
    ("value", "text"),
    [(28_123.4, "28,123"), (1500.0, "1,500"), (641.2, "641"), (12.345, "12.3"), (2.04, "2.04"),
     (0.5, "0.500"), (0.0, "0.00"), (-12_000.0, "-12,000")],
)  # fmt: skip
def test_format_number(value: float, text: str) -> None:
    assert format_number(value) == text


def test_results_table_has_median_spread_and_unit() -> None:
    rows = [
        Row("(a) batched push", "1 client", "msg/s", Summary.of([17_000, 16_500, 17_800])),
        Row("(d) wake latency", "p50", "ms", Summary.of([4.2])),
    ]
    lines = results_table(rows).splitlines()
    assert lines[0] == (
        "| scenario | figure | median | spread (min .. max) | unit | ceiling | % of ceiling "
        "| % of HTTP + DB |"
    )
    assert lines[1] == "| --- | --- | ---: | --- | --- | ---: | ---: | ---: |"
    assert lines[2] == (
        "| (a) batched push | 1 client | 17,000 | 16,500 .. 17,800 | msg/s | - | - | - |"
    )
    assert lines[3] == "| (d) wake latency | p50 | 4.20 | (1 run) | ms | - | - | - |"


def test_a_figure_with_a_ceiling_shows_it_and_its_fraction() -> None:
    row = Row("(b) push", "16 connections", "req/s", Summary.of([1500.0, 1400.0, 1600.0]),
              ceiling=6000.0)  # fmt: skip
    assert results_table([row]).splitlines()[2] == (
        "| (b) push | 16 connections | 1,500 | 1,400 .. 1,600 | req/s | 6,000 | 25% | - |"
    )
    both = Row("(b) push", "16 connections", "req/s", Summary.of([1500.0]), ceiling=6000.0,
               combined=2000.0)  # fmt: skip
    assert results_table([both]).splitlines()[2].endswith("| 6,000 | 25% | 75% |")


def test_failed_scenario_shows_the_error_escaped() -> None:
    table = results_table([Row("(c) pop", "msg/s", "msg/s", None, "BenchError: a | b\nc", 9.0)])
    assert "| (c) pop | msg/s | FAILED | BenchError: a \\| b c | msg/s | 9.00 | - | - |" in table


def test_cpu_table() -> None:
    row = CpuRow("(b)", "64 connections", 95.0, 70.0, 80.4, 12.0, 3.0, 190.2, 2)
    other = CpuRow("(e)", "-", None, None, 1.0, 0.0, None, 5.0, 2)
    lines = cpu_table([row, other]).splitlines()
    assert lines[0].startswith("| scenario | figure | server | busiest server worker | postgres")
    assert lines[2] == "| (b) | 64 connections | 95% | 70% | 80% | 12% | 3% | 190% of 200% |"
    assert lines[3] == "| (e) | - | n/a | n/a | 1% | 0% | n/a | 5% of 200% |"
