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
from typing import Any

SAMPLE_SQL = """
SELECT state,
       coalesce(wait_event_type || ':' || wait_event, 'CPU') AS waiting,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 60) AS query,
       count(*)
  FROM pg_stat_activity
 WHERE backend_type = 'client backend'
   AND pid <> pg_backend_pid()
   AND state NOT IN ('idle')
   AND query NOT LIKE 'LISTEN%'
 GROUP BY 1, 2, 3
"""


def summarise(counts: Counter[tuple[str, str, str]], samples: int, top: int = 10) -> dict[str, Any]:
    """Average backends per (state, wait, statement), busiest first."""
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
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-wait-sampler", daemon=True)

    def start(self) -> WaitSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        from queen_threads.db import connect_raw

        try:
            conn = connect_raw(self.dsn)
        except Exception as exc:  # the benchmark goes on without this evidence
            self.error = str(exc)
            return
        try:
            with conn.cursor() as cur:
                while not self._stop.is_set():
                    started = time.monotonic()
                    cur.execute(SAMPLE_SQL)
                    for state, waiting, query, n in cur.fetchall():
                        self.counts[(state, waiting, query)] += int(n)
                    self.samples += 1
                    self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
        except Exception as exc:
            self.error = str(exc)
        finally:
            conn.close()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(10)
        out = summarise(self.counts, self.samples)
        if self.error:
            out["error"] = self.error
        return out
