"""The live side of the analytics (migration 0018): a process's counts not flushed yet are
in its row of queen.metrics_live, which the charts add to the flushed minutes; the flush
deletes the row in its own transaction, so nothing counts twice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg2.extensions
import pytest

from queen_threads.runtime import Runtime
from tests.integration.test_analytics import QUIET, World


@pytest.fixture
def live(make_runtime: Callable[..., Runtime], pg_conn: psycopg2.extensions.connection) -> World:
    return World(make_runtime(**QUIET), pg_conn)


def live_rows(world: World) -> list[Any]:
    return [row[0] for row in world.api.sql("SELECT queues FROM queen.metrics_live")]


def pushed(world: World, queue: str | None = None, **filters: Any) -> int:
    params = {"queue": queue, **filters} if queue else filters
    return int(world.chart("/status/analytics", **params)["totals"]["pushed"])


def test_unflushed_counts_show_on_the_charts_once(live: World) -> None:
    collector = live.runtime.collector
    live.api.push("live.a", [1, 2, 3])
    assert pushed(live, "live.a") == 0  # nothing written yet
    assert collector.publish()
    assert not collector.publish(), "nothing new: no write"
    assert pushed(live, "live.a") == 3
    assert pushed(live) == 3
    assert pushed(live, namespace="live") == 3
    live.api.push("live.a", [4])
    live.api.push("live.b", [5])
    assert collector.publish()
    assert pushed(live, "live.a") == 4 and pushed(live) == 5
    live.flush()  # durable now, and the live row is gone in the same transaction
    assert live_rows(live) == []
    assert pushed(live, "live.a") == 4 and pushed(live) == 5
    live.api.push("live.a", [6])  # counted after the flush: live again
    assert collector.publish()
    assert pushed(live, "live.a") == 5
    [rows] = live_rows(live)
    assert [(r["queue"], r.get("pushed")) for r in rows] == [("live.a", 1)]


def test_rows_of_a_process_that_stopped_writing_are_ignored_and_deleted(live: World) -> None:
    live.api.push("live.gone", [1, 2])
    assert live.runtime.collector.publish()
    live.api.sql("UPDATE queen.metrics_live SET updated_at = now() - interval '11 minutes'")
    assert pushed(live, "live.gone") == 0
    live.api.push("live.here", [1])
    assert live.runtime.collector.publish()  # its write deletes the stale row
    assert len(live_rows(live)) == 1
    assert pushed(live, "live.here") == 1
