"""scripts/bench's combined (HTTP + database) ceiling: the bare app on the real gunicorn
gevent server stores what is pushed to it, single items and batches, in the scratch schema
of the database ceilings (bench/bare_app.py, bench/ceiling_db.py)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from bench import ceiling_db
from bench.options import parse_args
from bench.server import BareServer


def _push(url: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        f"{url}/api/v1/push",
        data=json.dumps({"items": items}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201
        answer: list[dict[str, Any]] = json.loads(response.read())
        return answer


def test_the_bare_app_stores_pushed_items_in_the_scratch_schema(fresh_db: str) -> None:
    scratch = ceiling_db.Scratch(fresh_db, "bench_ceiling_test")
    scratch.create()
    bare = BareServer(parse_args(["--workers", "2"]), fresh_db, scratch.name)
    try:
        target = bare.start()
        one = _push(target.url, [{"queue": "q", "payload": {"n": 1}, "transactionId": "t1"}])
        batch = [{"queue": "q", "payload": {"n": n}, "transactionId": f"t{n}"} for n in (2, 3, 4)]
        assert [r["status"] for r in one + _push(target.url, batch)] == ["queued"] * 4
    finally:
        bare.stop()
    with scratch.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT transaction_id, payload FROM {scratch.name}.messages ORDER BY id")
        rows = cur.fetchall()
    scratch.drop()
    assert rows == [(f"t{n}", {"n": n}) for n in (1, 2, 3, 4)]
