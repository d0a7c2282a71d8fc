"""Wake-ups only where some other process waits (queen.wake_interest, wake/interest.py):
the server's notifier call (queen.wake_batch_v2) sends an event only when another
process's unexpired row asks for its queue, or for its queue's namespace/task scope."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import psycopg2.extensions
import pytest

from queen_threads.db import Database
from queen_threads.errors import DatabaseUnavailable
from queen_threads.queue.store import QueueStore
from queen_threads.wake.store import WakeStore
from tests.integration.test_wake_after_commit import heard, item, listening

Conn = psycopg2.extensions.connection


@pytest.fixture
def wakes(database: Database) -> WakeStore:
    return WakeStore(database)


@pytest.fixture
def store(database: Database, wakes: WakeStore) -> QueueStore:
    return QueueStore(database, saw_epoch=wakes.saw_epoch)


def queue_in(namespace: str, task: str) -> str:
    return f"{namespace}.{task}.q{uuid.uuid4().hex[:6]}"


def want(store: QueueStore, origin: str, *selectors: dict[str, Any], ttl_ms: int = 60_000) -> int:
    return WakeStore(store.db).want(
        {"origin": origin, "ttlMs": ttl_ms, "selectors": list(selectors)}
    )


def sent(store: QueueStore, origin: str, *queues: str) -> int:
    events = [{"kind": "push", "queue": queue, "partition": "P"} for queue in queues]
    return WakeStore(store.db).notify({"origin": origin, "events": events})


def test_nobody_waiting_means_no_notify(migrated_dsn: str, store: QueueStore) -> None:
    listener = listening(migrated_dsn)
    queue = queue_in("ns", "t")
    store.push([item(queue)])
    assert sent(store, "pusher", queue) == 0
    assert heard(listener, 0.3) == []
    listener.close()


def test_only_the_queues_somebody_waits_for_are_notified(
    migrated_dsn: str, store: QueueStore
) -> None:
    listener = listening(migrated_dsn)
    wanted, unwanted = queue_in("ns", "t"), queue_in("ns", "t")
    store.push([item(wanted), item(unwanted)])
    assert want(store, "waiter", {"queue": wanted}) == 1
    assert sent(store, "pusher", wanted, unwanted) == 1
    assert [(e["queue"], e["origin"]) for e in heard(listener)] == [(wanted, "pusher")]
    listener.close()


def test_a_process_is_never_notified_for_its_own_interest(store: QueueStore) -> None:
    queue = queue_in("ns", "t")
    store.push([item(queue)])
    want(store, "same", {"queue": queue})
    assert sent(store, "same", queue) == 0
    assert sent(store, "other", queue) == 1


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ({"namespace": "billing", "task": None}, 1),
        ({"namespace": None, "task": "invoice"}, 1),
        ({"namespace": None, "task": None}, 1),
        ({"namespace": "billing", "task": "invoice"}, 1),
        ({"namespace": "billing", "task": "refund"}, 0),
        ({"namespace": "shipping", "task": None}, 0),
    ],
)
def test_namespace_and_task_scopes_match_like_the_long_polls(
    store: QueueStore, scope: dict[str, Any], expected: int
) -> None:
    queue = queue_in("billing", "invoice")
    store.push([item(queue)])
    want(store, "waiter", scope)
    assert sent(store, "pusher", queue) == expected


def test_a_queue_named_like_a_scope_key_is_not_a_scope(store: QueueStore) -> None:
    """A queue waiter is a queue waiter, whatever its name: no key joins parts together."""
    queue = queue_in("billing", "invoice")
    store.push([item(queue)])
    want(store, "waiter", {"queue": "billing"})
    assert sent(store, "pusher", queue) == 0


def test_expired_interest_is_ignored_and_renewing_it_counts_again(store: QueueStore) -> None:
    queue = queue_in("ns", "t")
    store.push([item(queue)])
    want(store, "waiter", {"queue": queue}, ttl_ms=0)
    assert sent(store, "pusher", queue) == 0
    want(store, "waiter", {"queue": queue})  # the same row, renewed
    assert sent(store, "pusher", queue) == 1


def test_withdrawing_deletes_only_that_process_rows(store: QueueStore, pg_conn: Conn) -> None:
    queue = queue_in("ns", "t")
    store.push([item(queue)])
    want(store, "leaving", {"queue": queue}, {"namespace": "ns", "task": None})
    want(store, "staying", {"queue": queue})
    assert WakeStore(store.db).withdraw("leaving") == 2
    with pg_conn.cursor() as cur:
        cur.execute("SELECT origin FROM queen.wake_interest")
        assert cur.fetchall() == [("staying",)]


def test_rows_expired_an_hour_ago_are_deleted_by_the_next_registration(
    store: QueueStore, pg_conn: Conn
) -> None:
    with pg_conn.cursor() as cur:
        cur.execute(
            "INSERT INTO queen.wake_interest VALUES"
            " ('gone', '{\"queue\": \"q\"}', now() - interval '61 minutes'),"
            " ('recent', '{\"queue\": \"q\"}', now() - interval '59 minutes')"
        )
    pg_conn.commit()
    want(store, "new", {"queue": "q"}, {"queue": "q"})  # a repeated selector is one row
    with pg_conn.cursor() as cur:
        cur.execute("SELECT origin FROM queen.wake_interest ORDER BY origin")
        assert cur.fetchall() == [("new",), ("recent",)]


# -- the epoch: what a notifier's copy of the rows must be at least as new as ---------------


def epoch_of_a_push(store: QueueStore, wakes: WakeStore, queue: str) -> int:
    store.push([item(queue)])
    return wakes.epoch


def test_pushes_and_acks_return_the_epoch_that_new_interest_moves_on(
    store: QueueStore, wakes: WakeStore
) -> None:
    queue = queue_in("ns", "t")
    before = epoch_of_a_push(store, wakes, queue)
    want(store, "waiter", {"queue": queue})
    after = epoch_of_a_push(store, wakes, queue)
    assert after == before + 1
    want(store, "waiter", {"queue": queue})  # a renewal of a live row changes nothing
    assert epoch_of_a_push(store, wakes, queue) == after
    want(store, "waiter", {"namespace": "ns", "task": None})  # a new selector does
    assert epoch_of_a_push(store, wakes, queue) == after + 1
    wakes.withdraw("waiter")  # and so does withdrawing
    [popped] = store.pop([{"queue": queue, "batch": 1, "leaseId": str(uuid.uuid4())}])
    [message] = popped["messages"]
    store.ack([{"transactionId": message["transactionId"],
                "partitionId": message["partitionId"], "status": "completed",
                "consumerGroup": "__QUEUE_MODE__", "leaseId": message["leaseId"]}])  # fmt: skip
    assert wakes.epoch == after + 2


def test_the_copy_a_notifier_reads_lists_other_processes_live_rows(
    store: QueueStore, wakes: WakeStore
) -> None:
    assert wakes.read("me") == {
        "epoch": 0, "queues": {}, "scopes": [], "ttlMs": None
    }  # fmt: skip
    want(store, "me", {"namespace": "x", "task": None})  # its own: not in its copy
    want(store, "other", {"queue": "a"}, {"queue": "b"}, ttl_ms=30_000)
    want(store, "third", {"queue": "a"})
    want(store, "expired", {"queue": "c"}, ttl_ms=0)
    copy = wakes.read("me")
    assert sorted(copy["queues"]) == ["a", "b"] and copy["scopes"] == []
    assert 0 < copy["ttlMs"] <= 30_000
    assert copy["epoch"] == 4
    assert wakes.read("other")["scopes"] == ["me"]
    # who waits: the relay hands what only siblings wait for to them (wake/siblings.py)
    assert sorted(copy["queues"]["a"]) == ["other", "third"] and copy["queues"]["b"] == ["other"]


def test_new_interest_waits_for_the_pushes_in_flight(
    migrated_dsn: str, store: QueueStore, wakes: WakeStore
) -> None:
    """The lock that makes the epoch safe: a push's transaction holds it shared until its
    commit, so new interest commits only after every push in flight, and its pop sees
    their messages; pushes after it return its epoch."""
    pushing = psycopg2.connect(migrated_dsn)
    with pushing.cursor() as cur:  # a push in flight: its transaction holds the lock
        cur.execute("SELECT queen._wake_epoch()")
        [(epoch,)] = cur.fetchall()
    registered = threading.Event()

    def register() -> None:
        want(store, "waiter", {"queue": "q"})
        registered.set()

    thread = threading.Thread(target=register)
    thread.start()
    with pushing.cursor() as cur:  # until the registration waits on the lock
        cur.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        while cur.fetchone() != (1,) and thread.is_alive():
            cur.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
    assert not registered.is_set()
    pushing.commit()
    thread.join(5)
    assert registered.is_set()
    assert epoch_of_a_push(store, wakes, queue_in("ns", "t")) == epoch + 1
    pushing.close()


def test_new_interest_gives_up_quickly_behind_a_stuck_push_and_holds_up_nobody(
    migrated_dsn: str, store: QueueStore, database: Database
) -> None:
    """A push stuck in its transaction (say, on a partition's row lock) keeps the shared
    lock: new interest waits for it at most 200 ms, then fails (the poll worker tries again
    on its next round), and pushes behind it go on instead of waiting for the pool's
    lock_timeout. The failure does not cost the pool its connections either."""
    queue = queue_in("ns", "t")
    store.push([item(queue)])  # the pool has a connection open
    stuck = psycopg2.connect(migrated_dsn)
    with stuck.cursor() as cur:
        cur.execute("SELECT queen._wake_epoch()")
    assert database.pool.stats()["open"] == 1
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable, match="lock timeout"):
        want(store, "waiter", {"queue": "q"})
    assert time.monotonic() - started < 2  # its own 200 ms, not the pool's 10 s
    assert database.pool.stats()["open"] == 1  # refused, not broken: the link is kept
    assert store.push([item(queue)])[0]["status"] == "queued"  # not held up
    stuck.rollback()
    assert want(store, "waiter", {"queue": "q"}) == 1
    stuck.close()
