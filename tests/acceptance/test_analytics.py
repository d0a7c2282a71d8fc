"""Analytics on the real server (gunicorn -k gevent, 2 worker processes, a short
METRICS_FLUSH_INTERVAL_S): a burst of pushes shows up in /api/v1/status/analytics within
seconds, counted once whichever process took which push, and so do the queue's depth and
both processes' rows."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx

from tests.support.server import ServerProcess

BURST = 200
DEADLINE_S = 10.0


def _get(srv: ServerProcess, path: str, **params: Any) -> dict[str, Any]:
    res = httpx.get(f"{srv.url}/api/v1{path}", params=params, timeout=5)
    assert res.status_code == 200, res.text
    return dict(res.json())


def test_a_burst_of_pushes_shows_up_in_the_analytics(migrated_dsn: str) -> None:
    queue = f"burst-{uuid.uuid4().hex[:8]}"
    with ServerProcess(migrated_dsn, workers=2, METRICS_FLUSH_INTERVAL_S="1") as srv:
        for chunk in range(BURST // 20):  # a connection each: the processes share them
            items = [{"queue": queue, "payload": {"n": chunk * 20 + i}} for i in range(20)]
            res = httpx.post(f"{srv.url}/api/v1/push", json={"items": items}, timeout=10)
            assert res.status_code == 201, res.text
        pushed_by = time.monotonic()

        deadline = pushed_by + DEADLINE_S
        while True:
            body = _get(srv, "/status/analytics", queue=queue)
            system = _get(srv, "/analytics/system-metrics")
            processes = system["totals"]["processes"]
            seen = (body["totals"]["pushed"], body["latest"]["depth"], processes)
            if seen == (BURST, BURST, 2):
                break
            assert time.monotonic() < deadline, f"(pushed, depth, processes) = {seen}"
            time.sleep(0.2)
        assert sum(p["pushed"] for p in body["series"]) == BURST
        everything = _get(srv, "/status/analytics")
        assert everything["totals"]["pushed"] == BURST
