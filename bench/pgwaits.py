"""What PostgreSQL's client backends are doing during a measured window.

A thread samples `pg_stat_activity` every 50 ms on its own connection and counts
(state, wait event, statement) triples; the average number of backends in each is the
evidence for "bound by commits" (IO:WALSync / LWLock:WALWrite), "serialised by a lock"
(Lock:transactionid, Lock:tuple, Lock:object for the NOTIFY queue) or "CPU" (no wait).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

# Client backends that are not idle, and background processes (autovacuum, checkpointer,
# WAL writer...) that are not sleeping (in their main loop: Activity; throttled: Timeout).
SAMPLE_SQL = """
SELECT CASE WHEN backend_type = 'client backend' THEN state ELSE backend_type END,
       coalesce(wait_event_type || ':' || wait_event, 'CPU') AS waiting,
       left(regexp_replace(coalesce(query, ''), '\\s+', ' ', 'g'), 60) AS query,
       count(*)
  FROM pg_stat_activity
 WHERE pid <> pg_backend_pid()
   AND CASE WHEN backend_type = 'client backend'
            THEN state <> 'idle' AND query NOT LIKE 'LISTEN%'
            ELSE coalesce(wait_event_type, '') NOT IN ('Activity', 'Timeout') END
 GROUP BY 1, 2, 3
"""
CHECKPOINTS_SQL = "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
# Sequential vs index scans per table: a plan that scans a growing table shows up here.
SCANS_SQL = """
SELECT schemaname || '.' || relname, seq_scan, seq_tup_read, coalesce(idx_scan, 0),
       n_live_tup, autoanalyze_count + analyze_count
  FROM pg_stat_user_tables
"""

# One SCANS_SQL row after the table name: seq_scan, seq_tup_read, idx_scan, n_live_tup, analyses.
ScanRow = tuple[int, int, int, int, int]
Scans = Mapping[str, ScanRow]


def _scan_row(values: Sequence[Any]) -> ScanRow:
    seq, read, idx, live, analyses = (int(x or 0) for x in values)
    return seq, read, idx, live, analyses


def scan_deltas(before: Scans, after: Scans, top: int = 5) -> list[dict[str, Any]]:
    """Tables by rows read sequentially between two SCANS_SQL snapshots."""
    rows: list[tuple[int, int, str, int, int, bool]] = []
    for table, now in after.items():
        old = before.get(table, (0, 0, 0, 0, 0))
        seq, read, idx = now[0] - old[0], now[1] - old[1], now[2] - old[2]
        if seq or read or idx:
            rows.append((read, idx, table, seq, now[3], now[4] > old[4]))
    rows.sort(key=lambda r: (-r[0], -r[1], r[2]))
    return [
        {"table": table, "seq_scans": seq, "seq_rows_read": read, "idx_scans": idx,
         "live_rows": live, "analyzed": analyzed}
        for read, idx, table, seq, live, analyzed in rows[:top]
    ]  # fmt: skip


def summarise(counts: Counter[tuple[str, str, str]], samples: int, top: int = 10) -> dict[str, Any]:
    """Average backends per (state or background process, wait, statement), busiest first."""
    if samples == 0:
        return {"samples": 0, "avg_active_backends": 0.0, "by_wait": {}, "top": []}
    total = sum(counts.values())
    by_wait: Counter[str] = Counter()
    for (_, waiting, _), n in counts.items():
        by_wait[waiting] += n
    return {
        "samples": samples,
        "avg_active_backends": round(total / samples, 2),
        "by_wait": {w: round(n / samples, 2) for w, n in by_wait.most_common(top)},
        "top": [
            {"state": s, "wait": w, "query": q, "avg_backends": round(n / samples, 2)}
            for (s, w, q), n in counts.most_common(top)
        ],
    }


class WaitSampler:
    """Sample pg_stat_activity from start() to stop(); stop() returns the summary."""

    def __init__(self, dsn: str, interval_s: float = 0.05) -> None:
        self.dsn = dsn
        self.interval_s = interval_s
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.samples = 0
        self.checkpoints = 0
        self.scans: list[dict[str, Any]] = []
        self.error: str | None = None
        self.backend_pid: int | None = None  # its own backend, kept out of PostgreSQL's CPU
        self._stop = threading.Event()
        self._connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-wait-sampler", daemon=True)

    def start(self, timeout: float = 5.0) -> WaitSampler:
        """Start sampling; returns once connected (``backend_pid`` known) or failed."""
        self._thread.start()
        self._connected.wait(timeout)
        return self

    def _run(self) -> None:
        from queen_threads.db import connect_raw

        try:
            conn = connect_raw(self.dsn)
        except Exception as exc:  # the benchmark goes on without this evidence
            self.error = str(exc)
            self._connected.set()
            return
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_backend_pid()")
                row = cur.fetchone()
                self.backend_pid = int(row[0]) if row else None
                self._connected.set()
                cur.execute(CHECKPOINTS_SQL)
                row = cur.fetchone()
                first = int(row[0]) if row else 0
                scans_before = self._scans(cur)
                while not self._stop.is_set():
                    started = time.monotonic()
                    cur.execute(SAMPLE_SQL)
                    for state, waiting, query, n in cur.fetchall():
                        self.counts[(state, waiting, query)] += int(n)
                    self.samples += 1
                    self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
                cur.execute(CHECKPOINTS_SQL)
                row = cur.fetchone()
                self.checkpoints = (int(row[0]) if row else 0) - first
                cur.execute("SELECT pg_stat_clear_snapshot()")
                self.scans = scan_deltas(scans_before, self._scans(cur))
        except Exception as exc:
            self.error = str(exc)
        finally:
            self._connected.set()
            conn.close()

    @staticmethod
    def _scans(cur: Any) -> Scans:
        cur.execute(SCANS_SQL)
        return {str(r[0]): _scan_row(r[1:]) for r in cur.fetchall()}

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(10)
        out = summarise(self.counts, self.samples)
        out["checkpoints"] = self.checkpoints
        out["table_scans"] = self.scans
        if self.error:
            out["error"] = self.error
        return out
