"""The markdown tables the benchmark prints: figures, and where the CPU went."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.ceiling_map import CeilingResult
from bench.stats import Summary


@dataclass(frozen=True)
class Row:
    """One line of the results table; `summary` is None when the scenario failed."""

    scenario: str
    figure: str
    unit: str
    summary: Summary | None = None
    error: str | None = None
    ceiling: float | None = None  # what the same work does without the server in the way
    combined: float | None = None  # the same, HTTP and database parts at once (ceiling_map)


def format_number(value: float) -> str:
    """Thousands separators for large values, a few significant decimals for small ones."""
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1 or magnitude == 0:
        return f"{value:.2f}"
    return f"{value:.3f}"


def spread(summary: Summary) -> str:
    if summary.runs == 1:
        return "(1 run)"
    return f"{format_number(summary.low)} .. {format_number(summary.high)}"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], lines: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """A GitHub markdown table; columns listed in `right` are right-aligned."""
    rule = ["---:" if i in right else "---" for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    out += ["| " + " | ".join(_escape(cell) for cell in line) + " |" for line in lines]
    return "\n".join(out)


def _fraction(row: Row, ceiling: float | None) -> str:
    if row.summary is None or not ceiling:
        return "-"
    return f"{row.summary.median / ceiling * 100:.0f}%"


def ceiling_cells(row: Row) -> list[str]:
    """`ceiling`, `% of ceiling` and `% of HTTP + DB` of a results line ("-" when the
    figure has none)."""
    shown = "-" if row.ceiling is None else format_number(row.ceiling)
    return [shown, _fraction(row, row.ceiling), _fraction(row, row.combined)]


def results_table(rows: Sequence[Row]) -> str:
    lines: list[list[str]] = []
    for row in rows:
        if row.summary is None:
            cells = [row.scenario, row.figure, "FAILED", row.error or "", row.unit]
        else:
            cells = [row.scenario, row.figure, format_number(row.summary.median),
                     spread(row.summary), row.unit]  # fmt: skip
        lines.append(cells + ceiling_cells(row))
    header = ["scenario", "figure", "median", "spread (min .. max)", "unit", "ceiling",
              "% of ceiling", "% of HTTP + DB"]  # fmt: skip
    return table(header, lines, (2, 5, 6, 7))


def ceilings_table(results: Sequence[CeilingResult]) -> str:
    """The ceilings themselves: what each measured and which figures it bounds."""
    lines = [
        [r.ceiling.key, r.ceiling.label,
         "FAILED" if r.value is None else format_number(r.value), r.ceiling.unit,
         r.ceiling.bounds + (f" ({r.error})" if r.error else "")]
        for r in results
    ]  # fmt: skip
    return table(["ceiling", "what", "measured", "unit", "bounds"], lines, (2,))


@dataclass(frozen=True)
class CpuRow:
    """Median CPU (% of one core) of each process group during one figure's measured window."""

    scenario: str
    figure: str
    server: float | None
    server_busiest: float | None
    postgres: float | None
    loadgen: float | None
    other: float | None
    machine: float | None
    cores: int


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}%"


def cpu_table(rows: Sequence[CpuRow]) -> str:
    lines = [
        [r.scenario, r.figure, _pct(r.server), _pct(r.server_busiest), _pct(r.postgres),
         _pct(r.loadgen), _pct(r.other), f"{_pct(r.machine)} of {r.cores * 100}%"]
        for r in rows
    ]  # fmt: skip
    return table(
        [
            "scenario",
            "figure",
            "server",
            "busiest server worker",
            "postgres",
            "load generator",
            "other",
            "machine busy",
        ],
        lines,
        (2, 3, 4, 5, 6, 7),
    )
