"""scripts/bench (g) end-to-end latency: the books, the latency figures, the step search."""

from __future__ import annotations

from bench.e2e import passes
from bench.e2e_flow import Books, latency_stats


def test_arrivals_keep_the_first_time_and_count_duplicates() -> None:
    books = Books(acked={"a": 1.0, "b": 1.0})
    books.arrive([{"transactionId": "a"}, {"transactionId": "x"}], 2.0)
    books.arrive([{"transactionId": "a"}], 3.0)
    assert books.received == {"a": 2.0, "x": 2.0}
    assert books.duplicates == 1
    assert books.missing() == 1  # b


def test_latency_is_clamped_at_zero_and_negatives_are_counted() -> None:
    acked = {"a": 10.0, "b": 10.0, "c": 10.0, "lost": 10.0}
    received = {"a": 10.002, "b": 9.999, "c": 10.010, "warmup": 1.0}
    stats = latency_stats(acked, received)
    assert (stats["pushed"], stats["received"], stats["lost"], stats["negative"]) == (4, 3, 1, 1)
    assert round(stats["raw_min_ms"], 3) == -1.0
    assert round(stats["p50_ms"], 3) == 2.0  # of 0, 2, 10
    assert round(stats["max_ms"], 3) == 10.0


def test_nothing_received_has_no_percentiles() -> None:
    stats = latency_stats({"a": 1.0}, {})
    assert stats["lost"] == 1 and "p99_ms" not in stats


def test_a_rate_passes_with_p99_in_the_limit_and_the_rate_kept() -> None:
    assert passes({"p99_ms": 99.0, "achieved_rate": 1900.0}, 2000, 100)
    assert not passes({"p99_ms": 101.0, "achieved_rate": 2000.0}, 2000, 100)
    assert not passes({"p99_ms": 20.0, "achieved_rate": 1899.0}, 2000, 100)
    assert not passes({"achieved_rate": 0.0}, 2000, 100)


def test_all_or_none_cancels_the_rest_when_one_fails() -> None:
    import asyncio

    import pytest

    from bench.e2e_flow import all_or_none

    finished: list[str] = []

    async def slow() -> None:
        await asyncio.sleep(10)
        finished.append("slow")

    async def failing() -> None:
        await asyncio.sleep(0.01)
        raise RuntimeError("boom")

    async def main() -> list[asyncio.Task[None]]:
        background = asyncio.create_task(slow())
        with pytest.raises(RuntimeError, match="boom"):
            await all_or_none([background, failing()])
        return [background]

    (background,) = asyncio.run(main())
    assert background.cancelled() and not finished
