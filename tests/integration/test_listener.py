"""The wake-up listener on a real PostgreSQL: it survives a terminated backend and any
unexpected exception, reconnects, and the next NOTIFY still reaches its handler."""

from __future__ import annotations

import json
import queue
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg2.extensions
import pytest

from queen_threads.db import Listener
from queen_threads.wake.listener import Backoff, WakeupListener, listen

Conn = psycopg2.extensions.connection


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def listener_backends(conn: Conn, application_name: str) -> list[int]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s AND query LIKE 'LISTEN%%'",
            (application_name,),
        )
        return [row[0] for row in cur.fetchall()]


def push_by_sql(conn: Conn, queue_name: str) -> None:
    """A push that only LISTEN/NOTIFY can announce (no server process is involved)."""
    item = {"queue": queue_name, "payload": "x", "transactionId": str(uuid.uuid4())}
    with conn.cursor() as cur:
        cur.execute("SELECT queen.push_messages_v2(%s::jsonb)", (json.dumps([item]),))


class Harness:
    def __init__(self, dsn: str, connect: Callable[[str, str], Listener] = listen) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.woken = 0
        self.listener = WakeupListener(
            dsn, self.events.put, self._wake_all, connect=connect, backoff=Backoff(0.05, 0.2)
        )

    def _wake_all(self) -> None:
        self.woken += 1

    def next_push(self, timeout: float) -> dict[str, Any]:
        while True:
            event = self.events.get(timeout=timeout)
            if event.get("kind") == "push":
                return event


@pytest.fixture
def harness_factory(migrated_dsn: str) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(connect: Callable[[str, str], Listener] = listen) -> Harness:
        h = Harness(migrated_dsn, connect)
        h.listener.start()
        made.append(h)
        return h

    yield make
    for h in made:
        h.listener.stop()


def test_terminated_backend_is_replaced_and_the_next_push_is_heard(
    harness_factory: Callable[..., Harness], pg_conn: Conn
) -> None:
    h = harness_factory()
    name = h.listener.application_name
    wait_until(lambda: h.listener.connected.is_set() and len(listener_backends(pg_conn, name)) == 1)
    (old_pid,) = listener_backends(pg_conn, name)
    with pg_conn.cursor() as cur:
        cur.execute("SELECT pg_terminate_backend(%s)", (old_pid,))
    # on_reconnect (every poll worker is woken after the gap) runs once LISTEN is back
    wait_until(lambda: h.woken == 1 and h.listener.connected.is_set())
    assert h.listener.reconnects == 1
    (new_pid,) = listener_backends(pg_conn, name)
    assert new_pid != old_pid
    assert h.listener.errors == 1 and "terminat" in (h.listener.last_error or "")
    q = f"listen-{uuid.uuid4().hex[:8]}"
    pushed_at = time.monotonic()
    push_by_sql(pg_conn, q)
    assert h.next_push(timeout=1.0)["queue"] == q
    assert time.monotonic() - pushed_at < 1.0


class BuggyListener(Listener):
    """A real LISTEN connection whose first wait fails with an unexpected exception."""

    failures = 1

    def wait(self, timeout_s: float) -> list[str]:
        if BuggyListener.failures > 0:
            BuggyListener.failures -= 1
            raise RuntimeError("unexpected bug in the listen loop")
        return super().wait(timeout_s)


def test_unexpected_exception_in_the_loop_reconnects_instead_of_killing_the_thread(
    harness_factory: Callable[..., Harness], pg_conn: Conn
) -> None:
    BuggyListener.failures = 1
    h = harness_factory(lambda dsn, app: BuggyListener(dsn, "queen_wakeup", application_name=app))
    wait_until(lambda: h.listener.reconnects == 1 and h.listener.connected.is_set())
    assert h.listener.alive
    assert h.listener.errors == 1
    assert (h.listener.last_error or "").startswith("RuntimeError")
    q = f"listen-{uuid.uuid4().hex[:8]}"
    push_by_sql(pg_conn, q)
    assert h.next_push(timeout=1.0)["queue"] == q


def test_unexpected_exception_while_connecting_is_retried(
    harness_factory: Callable[..., Harness], pg_conn: Conn
) -> None:
    attempts: list[int] = []

    def flaky_connect(dsn: str, app: str) -> Listener:
        attempts.append(1)
        if len(attempts) <= 2:
            raise TypeError("not a database error")
        return listen(dsn, app)

    h = harness_factory(flaky_connect)
    wait_until(h.listener.connected.is_set)
    assert len(attempts) == 3 and h.listener.errors == 2 and h.listener.alive
    assert h.listener.reconnects == 0  # the first connection is not a reconnect
    q = f"listen-{uuid.uuid4().hex[:8]}"
    push_by_sql(pg_conn, q)
    assert h.next_push(timeout=1.0)["queue"] == q


def test_a_failing_handler_drops_one_event_not_the_connection(
    migrated_dsn: str, pg_conn: Conn
) -> None:
    seen: queue.Queue[str] = queue.Queue()

    def handler(event: dict[str, Any]) -> None:
        if event.get("queue", "").startswith("bad-"):
            raise ValueError("handler bug")
        seen.put(event.get("queue", ""))

    listener = WakeupListener(migrated_dsn, handler, lambda: None)
    listener.start()
    try:
        wait_until(listener.connected.is_set)
        push_by_sql(pg_conn, f"bad-{uuid.uuid4().hex[:8]}")
        good = f"good-{uuid.uuid4().hex[:8]}"
        push_by_sql(pg_conn, good)
        assert seen.get(timeout=2.0) == good
        assert listener.errors == 1 and listener.reconnects == 0
    finally:
        listener.stop()


def test_backoff_doubles_to_its_cap_and_resets_after_a_stable_link() -> None:
    b = Backoff(0.2, 1.0, stable_s=10)
    assert [b.after(0) for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert b.after(11) == 0.2
