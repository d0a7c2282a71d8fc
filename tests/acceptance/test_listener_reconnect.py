"""The real server's LISTEN connection is killed (`pg_terminate_backend`): the listener
reconnects by itself and the next push, which only LISTEN/NOTIFY can announce (stored by
SQL, no server process involved; the database is polled only every 5 s), still wakes a
waiting long poll within a second."""

from __future__ import annotations

import time
from typing import Any

import httpx
import psycopg2
import psycopg2.extensions
import pytest

from tests.acceptance.test_long_poll import Waiter, qname
from tests.integration.test_listener import listener_backends, push_by_sql
from tests.support.server import ServerProcess

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)

SLOW_POLLING = {"POLL_DB_INTERVAL": "5000", "QUEUE_MAX_POLL_INTERVAL": "10000"}


def listener_stats(url: str) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(f"{url}/metrics").json()["wakeupListener"]
    return stats


def waiting(url: str) -> int:
    return int(httpx.get(f"{url}/metrics").json()["longPolling"]["registry"]["intentions"])


def wait_for(url: str, **expected: Any) -> dict[str, Any]:
    """Until this (single worker process) server's listener shows `expected`."""
    deadline = time.monotonic() + 10
    while True:
        stats = listener_stats(url)
        if all(stats[k] == v for k, v in expected.items()):
            return stats
        assert time.monotonic() < deadline, f"listener never reached {expected}: {stats}"
        time.sleep(0.02)


def test_push_wakes_a_long_poll_after_the_listener_backend_is_terminated(
    migrated_dsn: str, admin_conn: psycopg2.extensions.connection
) -> None:
    # One worker process: /metrics always describes the listener that is killed.
    with ServerProcess(migrated_dsn, workers=1, **SLOW_POLLING) as srv:
        wait_for(srv.url, connected=True)
        pid = httpx.get(f"{srv.url}/metrics").json()["worker"]["pid"]
        name = f"queen-threads-listener:{pid}"
        (old_backend,) = listener_backends(admin_conn, name)
        with admin_conn.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", (old_backend,))
        stats = wait_for(srv.url, connected=True, reconnects=1)
        reconnected_at = time.monotonic()
        assert stats["errors"] == 1
        (new_backend,) = listener_backends(admin_conn, name)
        assert new_backend != old_backend

        q = qname()
        waiter = Waiter(srv.url, q, timeout_ms=15000)
        waiter.start()
        deadline = time.monotonic() + 10
        while waiting(srv.url) != 1:  # this process's registry (one worker process)
            assert time.monotonic() < deadline, "the long poll never registered"
            time.sleep(0.01)
        pushed_at = time.monotonic()
        push_by_sql(admin_conn, q)
        waiter.join(15)
        assert waiter.response is not None and waiter.response.status_code == 200
        assert waiter.response.json()["messages"][0]["data"] == "x"
        assert waiter.answered_at - pushed_at < 1.0, "woken by NOTIFY, not by the 5 s poll"
        assert waiter.answered_at - reconnected_at < 1.0, "heard within 1 s of the reconnect"
