"""Adding to a labelled Prometheus counter, once per distinct set of labels."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from typing import TypeVar

from prometheus_client import Counter

Labels = TypeVar("Labels", bound=tuple[str, ...])


def inc(counter: Counter, labels: Iterable[tuple[str, ...]]) -> None:
    """Add one to `counter{labels}` per item (one call per distinct set of labels)."""
    inc_counts(counter, collections.Counter(labels))


def inc_counts(counter: Counter, counts: Mapping[Labels, int]) -> None:
    """Add `n` to `counter{labels}` per (labels, n) of `counts`."""
    for key, n in counts.items():
        counter.labels(*key).inc(n)
