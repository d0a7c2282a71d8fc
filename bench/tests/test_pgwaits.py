"""scripts/bench PostgreSQL wait-event sampling: the summary of the counts."""

from __future__ import annotations

from collections import Counter

from bench.pgwaits import summarise


def test_average_backends_per_wait_and_statement() -> None:
    counts: Counter[tuple[str, str, str]] = Counter(
        {
            ("active", "Lock:transactionid", "SELECT queen.push_messages_v2("): 40,
            ("active", "CPU", "SELECT queen.push_messages_v2("): 6,
            ("active", "IO:WALSync", "SELECT queen.push_messages_v2("): 4,
            ("active", "CPU", "SELECT queen.pop_unified_batch("): 2,
        }
    )
    out = summarise(counts, samples=10, top=3)
    assert out["samples"] == 10
    assert out["avg_active_backends"] == 5.2
    assert out["by_wait"] == {"Lock:transactionid": 4.0, "CPU": 0.8, "IO:WALSync": 0.4}
    assert out["top"][0] == {
        "state": "active",
        "wait": "Lock:transactionid",
        "query": "SELECT queen.push_messages_v2(",
        "avg_backends": 4.0,
    }
    assert len(out["top"]) == 3


def test_no_samples() -> None:
    assert summarise(Counter(), 0) == {
        "samples": 0,
        "avg_active_backends": 0.0,
        "by_wait": {},
        "top": [],
    }


def test_scan_deltas_rank_tables_by_rows_read_sequentially() -> None:
    from bench.pgwaits import scan_deltas

    before = {"queen.messages": (10, 1000, 0, 500, 0), "queen.queues": (5, 5, 9, 1, 0)}
    after = {
        "queen.messages": (110, 50_001_000, 0, 600_000, 1),
        "queen.queues": (5, 5, 19, 1, 0),
        "queen.idle": (0, 0, 0, 0, 0),
    }
    out = scan_deltas(before, after)
    assert out == [
        {"table": "queen.messages", "seq_scans": 100, "seq_rows_read": 50_000_000,
         "idx_scans": 0, "live_rows": 600_000, "analyzed": True},
        {"table": "queen.queues", "seq_scans": 0, "seq_rows_read": 0, "idx_scans": 10,
         "live_rows": 1, "analyzed": False},
    ]  # fmt: skip
