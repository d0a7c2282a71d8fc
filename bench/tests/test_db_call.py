"""bench/db_call.py: both loops run, with the stand-in connection in place of the
driver's."""

from __future__ import annotations

from bench.db_call import measure


def test_both_loops_are_measured_without_a_database() -> None:
    result = measure(None, calls=200, rounds=2)
    assert result["database"] is False and result["rounds"] == 2
    for name in ("plain", "metered"):
        assert result[name]["cpuUs"] > 0 and result[name]["minWallUs"] > 0
    assert set(result["overhead"]) == set(result["plain"])
