"""Queen's SQL API wakes the server's long polls at the caller's commit, never on a
rollback, and only where some server process waits (queen.wake_interest); consume_one's
wait holds nothing a producer's commit needs (docs/sql.md, docs/architecture.md "Wake-ups")."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.sql_api import Listener, SqlFace


@pytest.fixture
def app(migrated_dsn: str) -> Iterator[SqlFace]:
    face = SqlFace(migrated_dsn)
    yield face
    face.close()


@pytest.fixture
def listener(migrated_dsn: str) -> Iterator[Listener]:
    heard = Listener(migrated_dsn)
    yield heard
    heard.close()


def qname() -> str:
    return f"sw-{uuid.uuid4().hex[:8]}"


def want(dsn: str, *selectors: dict[str, Any]) -> None:
    """Another server process says its long polls wait for these (wake/interest.py)."""
    face = SqlFace(dsn, autocommit=True)
    face.one("SELECT queen.wake_interest_v1(%s::jsonb)", json.dumps(
        {"origin": "elsewhere", "ttlMs": 60_000, "selectors": list(selectors)}))  # fmt: skip
    face.close()


def pushes(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted((e["kind"], e["queue"], e["partition"]) for e in events)


def test_a_produce_wakes_at_commit_and_never_on_rollback(
    app: SqlFace, listener: Listener, migrated_dsn: str
) -> None:
    q = qname()
    want(migrated_dsn, {"queue": q})
    app.produce_one(q, 1, "A")
    app.call("produce", [{"queue": q, "partition": "B", "payload": 2}])
    assert listener.events(0.2) == []  # inside the transaction: nothing yet
    app.commit()
    events = listener.events()
    assert pushes(events) == [("push", q, "A"), ("push", q, "B")]
    assert events[0]["namespace"] == q and "origin" not in events[0]  # every process acts
    app.produce_one(q, 3, "A")
    app.rollback()
    app.produce_one(q, 4, "C")
    app.one("SAVEPOINT s")
    app.produce_one(q, 5, "D")
    app.one("ROLLBACK TO SAVEPOINT s")
    app.commit()
    assert pushes(listener.events(0.5)) == [("push", q, "C")]


def test_only_what_some_process_waits_for_is_sent(
    app: SqlFace, listener: Listener, migrated_dsn: str
) -> None:
    quiet, by_scope = qname(), f"ns{uuid.uuid4().hex[:6]}.task.q"
    want(migrated_dsn, {"namespace": by_scope.split(".")[0], "task": None})
    app.produce_one(quiet, 1)
    app.produce_one(by_scope, 2)
    app.commit()
    assert pushes(listener.events(0.5)) == [("push", by_scope, "Default")]


def test_an_interest_that_appears_before_the_commit_is_served(
    app: SqlFace, listener: Listener, migrated_dsn: str
) -> None:
    """The check is made at commit: a long poll that began waiting while the producer's
    transaction was open is woken by its commit."""
    q = qname()
    app.produce_one(q, 1)
    want(migrated_dsn, {"queue": q})
    app.commit()
    assert pushes(listener.events()) == [("push", q, "Default")]


def test_outside_read_committed_every_wake_up_is_sent(
    migrated_dsn: str, listener: Listener
) -> None:
    face = SqlFace(migrated_dsn)
    face.conn.set_session(isolation_level="REPEATABLE READ")
    q = qname()
    face.produce_one(q, 1)
    face.commit()
    face.close()
    assert pushes(listener.events()) == [("push", q, "Default")]


def test_a_commit_that_frees_a_partition_wakes_at_commit(
    app: SqlFace, listener: Listener, migrated_dsn: str
) -> None:
    q = qname()
    app.produce_one(q, 1)
    app.produce_one(q, 2)
    app.commit()
    [row] = app.consume_one(q)
    app.commit()
    want(migrated_dsn, {"queue": q})
    listener.events(0.1)
    assert app.commit_one(row)
    assert listener.events(0.2) == []
    app.commit()
    [event] = listener.events()
    assert (event["kind"], event["queue"], event["consumerGroup"]) == ("free", q, "__QUEUE_MODE__")
    [row] = app.consume_one(q)
    app.commit_one(row)
    app.rollback()
    assert listener.events(0.3) == []


def test_a_delayed_produce_announces_its_timer_to_the_firers_at_commit(
    app: SqlFace, listener: Listener
) -> None:
    app.rows("SELECT * FROM queen.produce_full(%s, '1', delay_until => now() + '5 s')", qname())
    assert listener.events(0.2) == []
    app.commit()
    [event] = listener.events()
    assert event["kind"] == "timers" and 4000 < event["inMs"] <= 5000


def test_consume_one_waits_for_a_commit_without_holding_up_the_producer(
    migrated_dsn: str,
) -> None:
    """A group's first consume of a queue registers it (a lock every producer's commit
    takes shared): the waiting consume gives it back between its looks, so a producer that
    starts after the wait began commits at once, and the consume gets its message."""
    q = qname()
    setup = SqlFace(migrated_dsn, autocommit=True)
    setup.produce_one(q, "before")
    setup.close()
    consumer = SqlFace(migrated_dsn)
    got: list[list[dict[str, Any]]] = []
    started = threading.Event()

    def wait() -> None:
        started.set()
        got.append(consumer.consume_one(q, "fresh-group", 5, subscription_mode="new",
                                        timeout_seconds=20))  # fmt: skip

    waiter = threading.Thread(target=wait)
    waiter.start()
    started.wait()
    time.sleep(0.3)  # the consume has looked at least once and is waiting
    producer = SqlFace(migrated_dsn, options="-c lock_timeout=2000")
    begun = time.monotonic()
    producer.produce_one(q, "during")
    producer.commit()
    committed_in = time.monotonic() - begun
    waiter.join(10)
    producer.close()
    assert not waiter.is_alive() and committed_in < 1.5
    assert [r["payload"] for r in got[0]] == ["during"]  # after its subscription, not before
    consumer.commit()
    consumer.close()


def test_consume_one_gives_up_at_its_timeout_and_holds_nothing(migrated_dsn: str) -> None:
    q = qname()
    face = SqlFace(migrated_dsn)
    begun = time.monotonic()
    assert face.consume_one(q, "g", timeout_seconds=1) == []
    assert 0.9 < time.monotonic() - begun < 3
    # (PostgreSQL's own advisory locks: keys of one int8 or two int4; Citus's shard locks,
    # which producers never take, have other tags)
    locks = face.one(
        "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()"
        " AND (locktype = 'tuple' OR (locktype = 'advisory' AND objsubid IN (1, 2)))"
    )
    assert locks == 0  # the registration lock of the group's looks went back with them
    face.rollback()
    face.close()
