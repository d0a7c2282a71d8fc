"""Small statistics: medians, percentiles and the median/min/max summary of repeated runs."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100) with linear interpolation between closest ranks.

    The same definition as numpy's default ('linear'): rank = p/100 * (n - 1).
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be within 0..100, got {p}")
    ordered = sorted(values)
    rank = p / 100 * (len(ordered) - 1)
    low = math.floor(rank)
    high = math.ceil(rank)
    if low == high:
        return float(ordered[low])
    weight = rank - low
    return float(ordered[low] * (1 - weight) + ordered[high] * weight)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


@dataclass(frozen=True)
class Summary:
    """What a figure's runs amount to: the median and the spread (min..max)."""

    median: float
    low: float
    high: float
    runs: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary:
        data = [float(v) for v in values]
        if not data:
            raise ValueError("summary of no values")
        return cls(median(data), min(data), max(data), len(data))

    def as_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.low, "max": self.high, "runs": self.runs}


def rate(count: float, seconds: float) -> float:
    """count / seconds, 0 when no time passed."""
    return count / seconds if seconds > 0 else 0.0
