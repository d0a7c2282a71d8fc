"""The heads of several groups popped in one call take the queues' registration locks in
one order (queue/popper.py, `lock_order`), so two processes' calls never deadlock.

A group's first pop of a queue registers the group (`queen._register_group`) under the
queue's registration lock, held until the call commits. A third session holds the lock of
queue `a`; call A names the heads [a, b], call B [b, a], and both wait. In the calls' own
orders B would hold `b` while waiting for `a`, and A, once it has `a`, would wait for `b`:
a deadlock, which PostgreSQL breaks only after `deadlock_timeout` (1 s), failing one call
while both poll workers stand still (issue 41: every wake-up of their groups came a second
late or more). In queue-name order both wait for `a`, then go one after the other.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import orjson
import psycopg2
import pytest

from queen_threads.db import Database
from queen_threads.polling import PopResult
from queen_threads.queue.intention import PollIntention, PopRequest
from queen_threads.queue.popper import DbPopper
from queen_threads.queue.store import QueueStore


def intention(queue: str) -> PollIntention:
    now = time.monotonic()
    return PollIntention(
        request_id=uuid.uuid4().hex,
        worker_id=0,
        request=PopRequest(queue=queue),
        deadline=now + 30,
        created_at=now,
    )


class Call(threading.Thread):
    """`pop_heads` of `heads` on a thread of its own; `results` or `error` afterwards."""

    def __init__(self, popper: DbPopper, heads: list[PollIntention]) -> None:
        super().__init__(daemon=True)
        self.popper, self.heads = popper, heads
        self.results: list[PopResult] = []
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.results = self.popper.pop_heads(self.heads)
        except BaseException as exc:  # reported by the test
            self.error = exc


def waiting_for_registration(conn: Any) -> int:
    """Sessions waiting for a registration lock (`queen._registration_lock`)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
            " AND classid = 1364218452 AND NOT granted"
        )
        return int(cur.fetchone()[0])


def test_two_calls_naming_new_queues_in_opposite_orders_do_not_deadlock(
    database: Database, migrated_dsn: str
) -> None:
    store = QueueStore(database)
    tag = uuid.uuid4().hex[:8]
    a, b = f"order-{tag}-a", f"order-{tag}-b"
    store.push([{"queue": q, "payload": q, "transactionId": uuid.uuid4().hex} for q in (a, b)])
    holder = psycopg2.connect(migrated_dsn)
    watcher = psycopg2.connect(migrated_dsn)
    watcher.autocommit = True
    try:
        with holder.cursor() as cur:  # a's registration lock, until the commit below
            cur.execute(
                "SELECT queen._registration_lock(id) FROM queen.queues WHERE name = %s", (a,)
            )
            cur.execute("SELECT setting::int FROM pg_settings WHERE name = 'deadlock_timeout'")
            deadlock_timeout_ms = cur.fetchone()[0]  # (in ms)
        popper = DbPopper(store)
        heads_a = [intention(a), intention(b)]
        heads_b = [intention(b), intention(a)]
        calls = [Call(popper, heads_a), Call(popper, heads_b)]
        deadline = time.monotonic() + 10
        while waiting_for_registration(watcher) < 2:  # both calls are in, waiting
            assert time.monotonic() < deadline, "the calls did not reach the lock"
            time.sleep(0.01)
        released = time.monotonic()
        holder.commit()
        for call in calls:
            call.join(10)
        took_ms = (time.monotonic() - released) * 1000
    finally:
        holder.close()
        watcher.close()

    assert [call.error for call in calls] == [None, None]
    assert took_ms < deadlock_timeout_ms, f"{took_ms:.0f} ms: a deadlock was broken"
    # each result is its own head's, in the order given: the heads' queue's message or none
    for call in calls:
        assert [r.request_id for r in call.results] == [h.request_id for h in call.heads]
        for head, result in zip(call.heads, call.results, strict=True):
            if result.body is not None:
                assert orjson.loads(result.body)["queue"] == head.request.queue
    delivered = sorted(
        orjson.loads(r.body)["messages"][0]["data"]
        for call in calls
        for r in call.results
        if r.body is not None
    )
    assert delivered == [a, b]


@pytest.mark.parametrize("names", [["b", "a", "c"], ["c", "b", "a"]])
def test_the_heads_of_one_call_are_popped_in_queue_name_order(
    database: Database, names: list[str]
) -> None:
    """(The order the registration locks are taken in: the call's.)"""
    store = QueueStore(database)
    sent: list[list[str]] = []
    pop = store.pop

    def recording_pop(requests: Any) -> Any:
        sent.append([r["queue"] for r in requests])
        return pop(requests)

    store.pop = recording_pop  # type: ignore[method-assign]
    tag = uuid.uuid4().hex[:8]
    heads = [intention(f"order-{tag}-{n}") for n in names]
    results = DbPopper(store).pop_heads(heads)
    assert sent == [sorted(h.request.queue or "" for h in heads)]
    assert [r.request_id for r in results] == [h.request_id for h in heads]
