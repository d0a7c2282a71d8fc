"""POST /api/v1/kv and the path routes through the real server (gunicorn, 2 workers) on
real PostgreSQL (docs/kv.md): versions, preconditions, counters, pages, expiry, the
sweeper, and refusals that change nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.conftest import database_from_template
from tests.support.kv_http import KvHttp, put
from tests.support.server import ServerProcess

SWEEP_BATCH = 50


@pytest.fixture(scope="module")
def kv_server(pg_admin_dsn: str, template_db: str) -> Iterator[tuple[ServerProcess, str]]:
    with database_from_template(pg_admin_dsn, template_db) as dsn:
        env = {"KV_SWEEP_INTERVAL": 300, "KV_SWEEP_BATCH_SIZE": SWEEP_BATCH}
        with ServerProcess(dsn, workers=2, **env) as srv:
            yield srv, dsn


@pytest.fixture
def kv(kv_server: tuple[ServerProcess, str]) -> Iterator[KvHttp]:
    client = KvHttp(kv_server[0].url, kv_server[1])
    yield client
    client.close()


@pytest.fixture
def ns() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def test_put_then_get_answers_value_version_and_expiry(kv: KvHttp, ns: str) -> None:
    first = kv.one(put(ns, "k", {"n": 1}))
    assert first["applied"] is True and first["version"] > 0
    got = kv.one({"op": "get", "ns": ns, "key": "k"})
    assert (got["found"], got["value"], got["version"]) == (True, {"n": 1}, first["version"])
    assert got["expiresAt"].endswith("Z") and got["updatedAt"].endswith("Z")
    second = kv.one(put(ns, "k", None))
    assert second["version"] > first["version"], "versions only rise"
    assert kv.one({"op": "get", "ns": ns, "key": "k"})["value"] is None  # null is a value
    assert kv.one({"op": "get", "ns": ns, "key": "nope"}) == {
        "index": 0, "op": "get", "found": False, "key": "nope"
    }  # fmt: skip


def test_put_if_absent_has_one_winner_across_both_workers(
    kv_server: tuple[ServerProcess, str], ns: str
) -> None:
    srv, dsn = kv_server
    clients = [KvHttp(srv.url, dsn) for _ in range(12)]
    try:
        with ThreadPoolExecutor(len(clients)) as pool:
            results = list(pool.map(
                lambda ic: ic[1].one({"op": "putIfAbsent", "ns": ns, "key": "gate",
                                      "value": {"by": ic[0]}, "ttlSeconds": 60}),
                enumerate(clients),
            ))  # fmt: skip
        pids = {c.metrics()["worker"]["pid"] for c in clients}
    finally:
        for c in clients:
            c.close()
    winners = [r for r in results if r["applied"]]
    assert len(winners) == 1
    losers = [r for r in results if not r["applied"]]
    assert all(r["reason"] == "exists" and r["value"] == winners[0]["value"] for r in losers)
    assert all(r["version"] == winners[0]["version"] for r in losers)
    assert len(pids) == 2, "the racing connections reached both worker processes"


def test_a_check_and_a_write_of_one_key_in_racing_calls_do_not_deadlock(
    kv_server: tuple[ServerProcess, str], ns: str
) -> None:
    """A check locks its row shared, unless its call also writes the key: then two racing
    calls would each hold it shared and wait for the other to write."""
    srv, dsn = kv_server
    clients = [KvHttp(srv.url, dsn) for _ in range(8)]
    first = clients[0].one(put(ns, "k", "first"))["version"]
    try:
        with ThreadPoolExecutor(len(clients)) as pool:
            answers = list(pool.map(
                lambda ic: ic[1].kv({"op": "check", "ns": ns, "key": "k", "expect": first},
                                    put(ns, "k", ic[0])),
                enumerate(clients),
            ))  # fmt: skip
    finally:
        for c in clients:
            c.close()
    assert sum(a[0]["applied"] for a in answers) == 1, "one call saw the first version"
    assert all(a[1]["applied"] for a in answers)


def test_expect_fences_and_never_creates(kv: KvHttp, ns: str) -> None:
    absent = kv.one(put(ns, "k", 1, expect=42))
    assert (absent["applied"], absent["reason"], absent["version"]) == (False, "absent", 0)
    assert kv.one({"op": "get", "ns": ns, "key": "k"})["found"] is False
    v1 = kv.one(put(ns, "k", 1))["version"]
    v2 = kv.one(put(ns, "k", 2, expect=v1))["version"]
    stale = kv.one(put(ns, "k", 3, expect=v1))
    assert (stale["reason"], stale["value"], stale["version"]) == ("version", 2, v2)
    wrong = kv.one({"op": "delete", "ns": ns, "key": "k", "expect": v1})
    assert wrong["applied"] is False and wrong["reason"] == "version"
    assert kv.one({"op": "check", "ns": ns, "key": "k", "expect": v2})["applied"] is True
    assert kv.one({"op": "check", "ns": ns, "key": "k", "expect": 0})["reason"] == "exists"
    assert kv.one({"op": "delete", "ns": ns, "key": "k"})["applied"] is True
    again = kv.one({"op": "delete", "ns": ns, "key": "k"})
    assert (again["applied"], again["reason"]) == (False, "absent")
    assert kv.one({"op": "check", "ns": ns, "key": "k", "expect": 0})["applied"] is True


def test_incr_refuses_past_its_bounds_and_keeps_its_window(kv: KvHttp, ns: str) -> None:
    def incr(key: str, delta: Any, ttl: int = 60, **extra: Any) -> dict[str, Any]:
        return kv.one({"op": "incr", "ns": ns, "key": key, "delta": delta, "ttlSeconds": ttl,
                       **extra})  # fmt: skip

    first_shot = incr("c", 10, max=5)
    assert (first_shot["applied"], first_shot["reason"], first_shot["value"]) == (False, "limit", 0)
    assert [incr("c", 2, max=5)["value"] for _ in range(2)] == [2, 4]
    refused = incr("c", 2, max=5)
    assert (refused["applied"], refused["value"]) == (False, 4)
    assert incr("c", -5, min=0)["reason"] == "limit"
    assert incr("c", 0.5)["value"] == 4.5
    expiry = kv.one({"op": "get", "ns": ns, "key": "c"})["expiresAt"]
    incr("c", 1, ttl=3600)
    assert kv.one({"op": "get", "ns": ns, "key": "c"})["expiresAt"] == expiry, "create-only TTL"
    kv.one(put(ns, "obj", {"count": 0}))
    assert incr("obj", 1)["reason"] == "type"


def test_get_many_and_prefix_pages(kv: KvHttp, ns: str) -> None:
    kv.kv(*(put(ns, f"p:{i}", i) for i in range(5)), put(ns, "p%_x", "meta"), put(ns, "q", 0))
    many = kv.one({"op": "getMany", "ns": ns, "keys": ["p:1", "zz", "p:0", "yy"]})
    assert [r["key"] for r in many["rows"]] == ["p:0", "p:1"] and many["missing"] == ["zz", "yy"]
    page = kv.one({"op": "getPrefix", "ns": ns, "prefix": "p:", "limit": 2})
    assert [r["key"] for r in page["rows"]] == ["p:0", "p:1"]
    assert page["truncated"] is True and page["nextAfter"] == "p:1"
    rest = kv.one({"op": "getPrefix", "ns": ns, "prefix": "p:", "after": "p:1", "keysOnly": True})
    assert [r["key"] for r in rest["rows"]] == ["p:2", "p:3", "p:4"] and not rest["truncated"]
    assert "value" not in rest["rows"][0]
    weird = kv.one({"op": "getPrefix", "ns": ns, "prefix": "p%_"})
    assert [r["key"] for r in weird["rows"]] == ["p%_x"], "a prefix is data, never a pattern"


def test_a_batch_is_one_transaction_in_input_order(kv: KvHttp, ns: str) -> None:
    results = kv.kv(
        {"op": "getMany", "ns": ns, "keys": ["b"]},
        put(ns, "b", 1),
        {"op": "putIfAbsent", "ns": ns, "key": "a", "value": 1, "ttlSeconds": 60},
    )
    assert [r["index"] for r in results] == [0, 1, 2]
    assert [r["key"] for r in results[0]["rows"]] == ["b"], "reads see the batch's writes"
    lost = kv.call("/kv", {"operations": [
        put(ns, "c", 1),
        {"op": "putIfAbsent", "ns": ns, "key": "a", "value": 2, "ttlSeconds": 60, "required": True},
    ]})  # fmt: skip
    assert (lost["success"], lost["reason"], lost["failedIndex"]) == (False, "kv_precondition", 1)
    assert (lost["kvReason"], lost["value"]) == ("exists", 1)
    assert kv.one({"op": "get", "ns": ns, "key": "c"})["found"] is False, "all or nothing"


def test_an_expired_key_is_never_read_even_unswept(kv: KvHttp, ns: str) -> None:
    import psycopg2

    with psycopg2.connect(kv.dsn) as held, held.cursor() as cur:
        # A row past its expiry that the sweeper cannot take (this transaction holds it).
        cur.execute(
            "INSERT INTO queen.kv (namespace, key, value, version, expires_at) VALUES "
            "(%s, 'old', '1', nextval('queen.kv_version_seq'), now() - interval '1 s')",
            (ns,),
        )
        held.commit()
        cur.execute("SELECT 1 FROM queen.kv WHERE namespace = %s FOR UPDATE", (ns,))
        assert kv.one({"op": "get", "ns": ns, "key": "old"})["found"] is False
        assert kv.one({"op": "getMany", "ns": ns, "keys": ["old"]})["missing"] == ["old"]
        assert kv.one({"op": "getPrefix", "ns": ns, "prefix": "o"})["rows"] == []
        held.rollback()
    kv.one(put(ns, "short", 1, ttl=1))
    deadline = time.monotonic() + 1.5
    while kv.one({"op": "get", "ns": ns, "key": "short"})["found"]:
        assert time.monotonic() < deadline, "a key outlived its ttl"
        time.sleep(0.05)
    assert kv.one({"op": "putIfAbsent", "ns": ns, "key": "short", "value": 2,
                   "ttlSeconds": 60})["applied"] is True  # fmt: skip


def test_the_sweeper_removes_expired_keys_in_bounded_batches(kv: KvHttp, ns: str) -> None:
    def expired_total() -> int:
        return int(kv.metrics()["kv"]["expiredTotal"])

    before = expired_total()
    count = SWEEP_BATCH * 3 + 7
    kv.sql(
        "INSERT INTO queen.kv (namespace, key, value, version, expires_at) "
        "SELECT %s, 'k' || i, 'true', nextval('queen.kv_version_seq'), now() - interval '1 s' "
        "FROM generate_series(1, %s) i",
        ns,
        count,
    )
    kv.one(put(ns, "alive", 1))
    deadline = time.monotonic() + 15
    while kv.sql("SELECT count(*) FROM queen.kv WHERE namespace = %s", ns)[0][0] > 1:
        assert time.monotonic() < deadline, "the sweeper did not remove the expired keys"
        time.sleep(0.1)
    assert kv.one({"op": "get", "ns": ns, "key": "alive"})["found"] is True
    assert expired_total() >= before + count
    prom = httpx.get(f"{kv.url}/metrics/prometheus")
    line = next(ln for ln in prom.text.splitlines() if ln.startswith("queen_kv_expired_total"))
    assert float(line.split()[-1]) >= count


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        ({"op": "put", "ns": "NOT A NS", "key": "k", "value": 1, "ttlSeconds": 5},
         "kv_bad_namespace"),
        ({"op": "put", "ns": "ok", "key": "", "value": 1, "ttlSeconds": 5}, "kv_bad_key"),
        ({"op": "put", "ns": "ok", "key": "x" * 513, "value": 1, "ttlSeconds": 5},
         "kv_key_too_large"),
        ({"op": "put", "ns": "ok", "key": "k", "value": 1}, "kv_expiry_not_specified"),
        ({"op": "put", "ns": "ok", "key": "k", "value": 1, "ttlSeconds": 5, "forever": True},
         "kv_expiry_not_specified"),
        ({"op": "put", "ns": "ok", "key": "k", "value": 1, "ttlSeconds": 0}, "kv_bad_ttl"),
        ({"op": "put", "ns": "ok", "key": "k", "value": 1, "ttlSeconds": 1.5}, "kv_bad_ttl"),
        ({"op": "put", "ns": "ok", "key": "k", "ttlSeconds": 5}, "kv_bad_request"),
        ({"op": "put", "ns": "ok", "key": "k", "value": "x" * 70000, "ttlSeconds": 5},
         "kv_value_too_large"),
        ({"op": "put", "ns": "ok", "key": "k", "value": 1, "ttlSeconds": 5, "expect": None},
         "kv_bad_expect"),
        ({"op": "putIfAbsent", "ns": "ok", "key": "k", "value": 1, "ttlSeconds": 5, "expect": 3},
         "kv_bad_expect"),
        ({"op": "check", "ns": "ok", "key": "k"}, "kv_bad_expect"),
        ({"op": "incr", "ns": "ok", "key": "k", "delta": True, "ttlSeconds": 5}, "kv_bad_request"),
        ({"op": "incr", "ns": "ok", "key": "k", "delta": 1, "ttlSeconds": 5, "expect": 1},
         "kv_bad_request"),
        ({"op": "getPrefix", "ns": "ok", "prefix": ""}, "kv_prefix_required"),
        ({"op": "getMany", "ns": "ok", "keys": []}, "kv_bad_request"),
        ({"op": "drop", "ns": "ok", "key": "k"}, "kv_unknown_op"),
        ("put", "kv_bad_request"),
    ],
)  # fmt: skip
def test_a_malformed_operation_is_a_named_400_and_nothing_changes(
    kv: KvHttp, ns: str, op: Any, reason: str
) -> None:
    before = kv.rows()
    body = kv.refused("/kv", {"operations": [put(ns, "first", 1), op]})
    assert (body["code"], body["reason"]) == ("kv_bad_request", reason), body
    assert body["error"].startswith(reason) and body["detail"]
    assert kv.rows() == before


def test_call_level_refusals(kv: KvHttp, ns: str) -> None:
    before = kv.rows()
    twice = {"operations": [put(ns, "k", 1), put(ns, "k", 2)]}
    assert kv.refused("/kv", twice)["reason"] == "kv_duplicate_key_in_call"
    many = {"operations": [put(ns, f"k{i}", i) for i in range(257)]}
    assert kv.refused("/kv", many)["reason"] == "kv_too_many_ops"
    assert kv.refused("/kv", {"ops": []})["code"] == "kv_bad_request"
    assert kv.refused("/kv", {"operations": {}})["reason"] == "kv_bad_request"
    assert kv.rows() == before
    assert kv.call("/kv", {"operations": [], "unknown": 1}) == {"results": []}


def test_the_path_routes_serve_one_key(kv: KvHttp, ns: str) -> None:
    path = f"/kv/{ns}/orders/9f1"  # a key with '/' in it
    r = kv.http.put(path, json={"value": {"state": "held"}, "ttlSeconds": 60})
    assert r.status_code == 200 and r.json()["applied"] is True, r.text
    version = r.json()["version"]
    got = kv.http.get(path)
    assert got.json()["value"] == {"state": "held"} and got.headers["etag"] == f'"{version}"'
    assert kv.one({"op": "get", "ns": ns, "key": "orders/9f1"})["version"] == version
    stale = kv.http.delete(path, params={"expect": version + 1000})
    assert stale.json()["reason"] == "version"
    assert kv.http.delete(path, params={"expect": version}).json()["applied"] is True
    assert kv.http.get(path).json()["found"] is False
    bad = kv.http.put(f"/kv/BAD/{ns}", json={"value": 1, "ttlSeconds": 1})
    assert bad.status_code == 400 and bad.json()["reason"] == "kv_bad_namespace"
    assert kv.http.put(path, json={"value": 1}).json()["reason"] == "kv_expiry_not_specified"
    assert kv.http.delete(path, params={"expect": "x"}).status_code == 400
    assert kv.one({"op": "get", "ns": ns, "key": "orders/9f1"})["found"] is False
