"""POST /api/v1/locks through the real server (gunicorn, 2 workers) on real PostgreSQL
(docs/kv.md): one holder, a semaphore never above its limit under racing clients on both
worker processes, take-over after expiry, the owner's retry, fencing tokens that only
rise, permits that survive a restart, and refusals that change nothing."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psycopg2
import pytest

from tests.conftest import database_from_template
from tests.support.kv_http import KvHttp, acquire
from tests.support.server import ServerProcess


@pytest.fixture(scope="module")
def locks_db(pg_admin_dsn: str, template_db: str) -> Iterator[str]:
    with database_from_template(pg_admin_dsn, template_db) as dsn:
        yield dsn


@pytest.fixture(scope="module")
def locks_server(locks_db: str) -> Iterator[ServerProcess]:
    with ServerProcess(locks_db, workers=2) as srv:
        yield srv


@pytest.fixture
def kv(locks_server: ServerProcess, locks_db: str) -> Iterator[KvHttp]:
    client = KvHttp(locks_server.url, locks_db)
    yield client
    client.close()


@pytest.fixture
def name() -> str:
    return f"job/{uuid.uuid4().hex[:10]}:sync"


def test_a_lock_has_one_holder_and_its_permit_is_a_kv_row(kv: KvHttp, name: str) -> None:
    a = kv.lock(acquire(name, "a"))
    assert (a["acquired"], a["slot"], a["owner"]) == (True, 0, "a") and "already" not in a
    assert a["guard"] == {"op": "check", "ns": "queen-locks", "key": f"{name}#0",
                          "expect": a["token"], "required": True}  # fmt: skip
    b = kv.lock(acquire(name, "b"))
    assert (b["acquired"], b["reason"], b["holders"]) == (
        False,
        "held",
        [{"slot": 0, "owner": "a"}],
    )
    assert "token" not in b and "guard" not in b
    row = kv.one({"op": "get", "ns": "queen-locks", "key": f"{name}#0"})
    assert (row["version"], row["value"]) == (a["token"], {"owner": "a"})
    who = kv.lock({"op": "get", "name": name})
    assert who["held"] is True and who["holders"][0]["token"] == a["token"]
    assert kv.lock({"op": "release", "name": name, "token": a["token"]})["released"] is True
    assert kv.lock({"op": "get", "name": name}) == {"index": 0, "op": "get", "name": name,
                                                   "held": False, "holders": []}  # fmt: skip
    b = kv.lock(acquire(name, "b"))
    assert b["acquired"] and b["token"] > a["token"], "a later holder, a higher token"


def test_the_owners_retry_is_the_same_permit_and_renews_carry_through(
    kv: KvHttp, name: str
) -> None:
    first = kv.lock(acquire(name, "me"))
    again = kv.lock(acquire(name, "me"))
    assert again["already"] is True and again["token"] == first["token"]
    renew = {"op": "renew", "name": name, "token": first["token"], "ttlSeconds": 30, "owner": "me"}
    renewed = kv.lock(renew)
    resent = kv.lock(renew)  # the first answer was lost: the stale token is sent again
    assert first["token"] < renewed["token"] < resent["token"]
    stranger = kv.lock({**renew, "owner": "somebody-else"})
    assert (stranger["renewed"], stranger["reason"]) == (False, "lost")
    assert stranger["holders"] == [{"slot": 0, "owner": "me"}]
    stale = kv.lock({"op": "release", "name": name, "token": renewed["token"]})
    assert (stale["released"], stale["reason"]) == (False, "lost")
    since = kv.lock({"op": "get", "name": name})["holders"][0]
    assert since["token"] == resent["token"] and since["since"] < since["renewedAt"]
    assert kv.lock({"op": "release", "name": name, "token": resent["token"]})["released"]


def test_an_expired_lock_is_taken_over_and_the_old_holder_is_told(kv: KvHttp, name: str) -> None:
    takeovers = _prometheus(kv, 'queen_lock_acquires_total{outcome="takeover"}')
    old = kv.lock(acquire(name, "old", ttl=1))
    assert not kv.lock(acquire(name, "next"))["acquired"]
    deadline = time.monotonic() + 3
    while not (nxt := kv.lock(acquire(name, "next")))["acquired"]:
        assert time.monotonic() < deadline, "an expired permit was not free"
        time.sleep(0.05)
    assert nxt["token"] > old["token"]
    renew = {"op": "renew", "name": name, "token": old["token"], "ttlSeconds": 30, "owner": "old"}
    assert kv.lock(renew)["holders"] == [{"slot": 0, "owner": "next"}]
    assert kv.lock({"op": "release", "name": name, "token": old["token"]})["reason"] == "lost"
    guard = kv.call("/kv", {"operations": [old["guard"]]})
    assert (guard["reason"], guard["kvReason"], guard["value"]) == (
        "kv_precondition", "version", {"owner": "next"}
    )  # fmt: skip
    assert _prometheus(kv, 'queen_lock_acquires_total{outcome="takeover"}') >= takeovers + 1


def test_a_take_over_waits_for_a_guarded_bundle_in_flight(kv: KvHttp, name: str) -> None:
    """A guard holds its permit's row until the bundle commits: a take-over that comes
    when the lifetime ran out meanwhile waits for that commit instead of slipping under
    it, so the bundle never commits after the next holder got the lock."""
    old = kv.lock(acquire(name, "old", ttl=1))
    conn = psycopg2.connect(kv.dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT queen.transaction_kv_v1(%s::jsonb, 0)", (json.dumps([old["guard"]]),)
            )
            assert cur.fetchone()[0][0]["applied"] is True
            time.sleep(1.2)  # the permit's lifetime runs out while the bundle is open
            with ThreadPoolExecutor(1) as pool:
                taking = pool.submit(kv.lock, acquire(name, "next"))
                time.sleep(0.5)
                assert not taking.done(), "the take-over did not wait for the guarded bundle"
                conn.commit()
                taken = taking.result(timeout=10)
    finally:
        conn.close()
    assert taken["acquired"] and taken["token"] > old["token"]


def test_a_semaphore_never_grants_more_than_its_limit_to_racing_clients(
    locks_server: ServerProcess, locks_db: str, name: str
) -> None:
    """Racing clients on separate connections (both worker processes) take and give back
    permits of a semaphore of 3 for a while; the permits held at any moment, as the
    clients see them and as the table holds them, never exceed 3."""
    limit, racers, end = 3, 12, time.monotonic() + 3.0
    held: dict[int, str] = {}
    guard = threading.Lock()
    granted: list[tuple[int, int]] = []  # (slot, token) in grant order per slot
    overflow: list[str] = []
    clients = [KvHttp(locks_server.url, locks_db) for _ in range(racers)]

    def race(i: int) -> None:
        owner = f"racer-{i}"
        while time.monotonic() < end:
            got = clients[i].lock(acquire(name, owner, limit=limit))
            if not got["acquired"]:
                assert got["reason"] in ("held", "contended") and len(got["holders"]) <= limit
                continue
            with guard:
                if got["slot"] in held or len(held) >= limit:
                    overflow.append(f"{owner} got slot {got['slot']} while {held} held")
                held[got["slot"]] = owner
                granted.append((got["slot"], got["token"]))
            live = clients[i].sql(
                "SELECT count(*) FROM queen.kv WHERE namespace = 'queen-locks' "
                "AND starts_with(key, %s) AND expires_at > now()",
                f"{name}#",
            )[0][0]
            assert live <= limit
            with guard:
                del held[got["slot"]]
            release = {"op": "release", "name": name, "token": got["token"], "slot": got["slot"]}
            assert clients[i].lock(release)["released"] is True

    try:
        with ThreadPoolExecutor(racers) as pool:
            list(pool.map(race, range(racers)))
        pids = {c.metrics()["worker"]["pid"] for c in clients}
    finally:
        for c in clients:
            c.close()
    assert not overflow, overflow
    assert len(granted) > limit * 3, "the race hardly raced"
    assert len(pids) == 2, "the racing clients reached both worker processes"
    for slot in range(limit):
        tokens = [t for s, t in granted if s == slot]
        assert tokens == sorted(tokens), "a slot's fencing token only rises"
    assert {s for s, _ in granted} == set(range(limit))


def test_a_permit_survives_a_restart(locks_db: str, name: str) -> None:
    with ServerProcess(locks_db, workers=2) as first:
        kv = KvHttp(first.url, locks_db)
        held = kv.lock(acquire(name, "durable", ttl=60))
        kv.close()
    with ServerProcess(locks_db, workers=2) as second:
        kv = KvHttp(second.url, locks_db)
        try:
            assert kv.lock(acquire(name, "other"))["holders"] == [{"slot": 0, "owner": "durable"}]
            again = kv.lock(acquire(name, "durable", ttl=60))
            assert again["already"] is True and again["token"] == held["token"]
            assert kv.kv(held["guard"])[0]["applied"] is True
        finally:
            kv.close()


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        ({"op": "acquire", "name": "a#1", "ttlSeconds": 5}, "locks_bad_name"),
        ({"op": "acquire", "name": "", "ttlSeconds": 5}, "locks_bad_name"),
        ({"op": "acquire", "name": "a\nb", "ttlSeconds": 5}, "locks_bad_name"),
        ({"op": "acquire", "name": "x" * 257, "ttlSeconds": 5}, "locks_bad_name"),
        ({"op": "acquire", "name": "a"}, "locks_ttl_required"),
        ({"op": "acquire", "name": "a", "ttlSeconds": 5, "forever": True}, "locks_ttl_required"),
        ({"op": "acquire", "name": "a", "ttlSeconds": 0}, "locks_bad_ttl"),
        ({"op": "acquire", "name": "a", "ttlSeconds": "30"}, "locks_bad_ttl"),
        ({"op": "acquire", "name": "a", "ttlSeconds": 5, "owner": ""}, "locks_bad_owner"),
        ({"op": "acquire", "name": "a", "ttlSeconds": 5, "limit": 0}, "locks_bad_limit"),
        ({"op": "acquire", "name": "a", "ttlSeconds": 5, "limit": 1025}, "locks_bad_limit"),
        ({"op": "renew", "name": "a", "ttlSeconds": 5}, "locks_token_required"),
        ({"op": "release", "name": "a", "token": 0}, "locks_bad_token"),
        ({"op": "release", "name": "a", "token": 7, "slot": -1}, "locks_bad_slot"),
        ({"op": "lock", "name": "a"}, "locks_unknown_op"),
        (["acquire"], "locks_bad_request"),
    ],
)
def test_a_malformed_operation_is_a_named_400_and_nothing_changes(
    kv: KvHttp, name: str, op: Any, reason: str
) -> None:
    before = kv.rows()
    body = kv.refused("/locks", {"operations": [acquire(name, "first"), op]})
    assert (body["code"], body["reason"]) == ("locks_bad_request", reason), body
    assert kv.rows() == before
    twice = {"operations": [acquire(name), {"op": "get", "name": name}]}
    assert kv.refused("/locks", twice)["reason"] == "locks_duplicate_in_call"
    assert kv.rows() == before


def _prometheus(kv: KvHttp, series: str) -> float:
    text = httpx.get(f"{kv.url}/metrics/prometheus").text
    return sum(float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith(series))
