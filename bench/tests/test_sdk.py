"""scripts/bench (s), the streaming SDK: its registration, sizes, and the cycle timing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench.common import BenchError
from bench.options import DEFAULT_SCENARIOS, FULL, QUICK, parse_args
from bench.scenarios import SCENARIOS
from bench.sdk import CYCLE_PATH, latency_ms, sdk_figures, timed_posts


def test_the_sdk_scenario_runs_on_request_with_its_figures() -> None:
    assert "s" not in DEFAULT_SCENARIOS and parse_args(["--scenarios", "s"]).scenarios == ("s",)
    keys = [f.key for f in SCENARIOS["s"].figures(FULL)]
    assert keys == ["sdk_msg_per_s", "cycle_p50_ms", "cycle_p99_ms", "raw_msg_per_s"]
    assert (FULL.sdk_messages, QUICK.sdk_messages, FULL.sdk_batch) == (20_000, 4_000, 200)
    assert "20,000 msgs, 10 partitions" in sdk_figures(FULL)[0].label


def test_only_cycle_posts_are_timed_and_a_failed_one_still_counts() -> None:
    seen: list[float] = []
    calls: list[str] = []

    async def post(path: str, body: Any) -> Any:
        calls.append(path)
        await asyncio.sleep(0.01)
        if body == "fail":
            raise RuntimeError("refused")
        return {"success": True}

    timed = timed_posts(post, CYCLE_PATH, seen)

    async def main() -> None:
        await timed("/streams/v1/state/get", {})
        await timed(CYCLE_PATH, {})
        with pytest.raises(RuntimeError):
            await timed(CYCLE_PATH, "fail")

    asyncio.run(main())
    assert calls == ["/streams/v1/state/get", CYCLE_PATH, CYCLE_PATH]
    assert len(seen) == 2 and all(s >= 0.009 for s in seen)


def test_cycle_latency_percentiles_in_ms() -> None:
    stats = latency_ms([0.001 * i for i in range(1, 101)])
    assert round(stats["cycle_p50_ms"], 1) == 50.5 and round(stats["cycle_p99_ms"], 2) == 99.01
    with pytest.raises(BenchError):
        latency_ms([])
