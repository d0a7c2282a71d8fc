"""The `kv` rider of POST /api/v1/transaction through the real server (docs/kv.md): kv
writes, checks and lock guards commit with the bundle's pushes and acks or not at all,
and a lost required precondition is answered 200 with the flat index of the op."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import database_from_template
from tests.support.kv_http import KvHttp, acquire, put
from tests.support.queue_http import QueueHttp
from tests.support.server import ServerProcess


@pytest.fixture(scope="module")
def tx_server(pg_admin_dsn: str, template_db: str) -> Iterator[tuple[ServerProcess, str]]:
    with (
        database_from_template(pg_admin_dsn, template_db) as dsn,
        ServerProcess(dsn, workers=2) as srv,
    ):
        yield srv, dsn


@pytest.fixture
def kv(tx_server: tuple[ServerProcess, str]) -> Iterator[KvHttp]:
    client = KvHttp(tx_server[0].url, tx_server[1])
    yield client
    client.close()


@pytest.fixture
def queues(tx_server: tuple[ServerProcess, str]) -> QueueHttp:
    return QueueHttp(tx_server[0].url)


@pytest.fixture
def ns() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def pushes(queue: str, *payloads: Any) -> dict[str, Any]:
    items = [{"queue": queue, "payload": p, "transactionId": str(uuid.uuid4())} for p in payloads]
    return {"type": "push", "items": items}


def gate(ns: str, key: str) -> dict[str, Any]:
    return {"op": "putIfAbsent", "ns": ns, "key": key, "value": True, "ttlSeconds": 300,
            "required": True}  # fmt: skip


def test_the_gate_and_the_pushes_are_one_transaction(
    kv: KvHttp, queues: QueueHttp, ns: str
) -> None:
    queue = f"q-{ns}"
    first = kv.call("/transaction", {"operations": [pushes(queue, 1, 2)], "kv": [gate(ns, "e")]})
    assert first["success"] is True
    assert [(r["index"], r["type"]) for r in first["results"]][2:] == [(2, "kv")]
    assert first["results"][2]["applied"] is True
    second = kv.call("/transaction", {"operations": [pushes(queue, 3, 4)], "kv": [gate(ns, "e")]})
    assert (second["success"], second["reason"], second["kvReason"]) == (
        False, "kv_precondition", "exists"
    )  # fmt: skip
    assert second["failedIndex"] == 2, "the flat index: two pushed items come first"
    assert second["value"] is True and second["version"] == first["results"][2]["version"]
    assert [m["data"] for m in queues.pop(queue, batch=10, wait="false")] == [1, 2]


def test_a_guard_that_no_longer_holds_commits_nothing(
    kv: KvHttp, queues: QueueHttp, ns: str
) -> None:
    name, queue = f"lock-{ns}", f"q-{ns}"
    old = kv.lock(acquire(name, "old"))
    assert kv.lock({"op": "release", "name": name, "token": old["token"]})["released"]
    new = kv.lock(acquire(name, "new"))
    stale = kv.call("/transaction", {"operations": [pushes(queue, "old")], "kv": [old["guard"]]})
    assert (stale["reason"], stale["kvReason"], stale["failedIndex"]) == (
        "kv_precondition", "version", 1
    )  # fmt: skip
    assert stale["value"] == {"owner": "new"} and stale["version"] == new["token"]
    body = {"operations": [pushes(queue, "new")], "kv": [new["guard"], put(ns, "step", 1)]}
    assert kv.call("/transaction", body)["success"] is True
    assert [m["data"] for m in queues.pop(queue, batch=10, wait="false")] == ["new"]
    assert kv.one({"op": "get", "ns": ns, "key": "step"})["value"] == 1


def test_a_failed_ack_rolls_the_kv_writes_back(kv: KvHttp, queues: QueueHttp, ns: str) -> None:
    queue = f"q-{ns}"
    queues.push(queue, [{"v": 1}])
    [message] = queues.pop(queue, wait="false")
    bogus = {"type": "ack", "transactionId": str(uuid.uuid4()), "status": "completed",
             "partitionId": message["partitionId"], "leaseId": message["leaseId"]}  # fmt: skip
    r = kv.http.post("/transaction", json={"operations": [bogus], "kv": [put(ns, "marker", 1)]})
    assert r.status_code == 409 and r.json()["success"] is False, r.text
    assert kv.one({"op": "get", "ns": ns, "key": "marker"})["found"] is False


def test_a_kv_only_bundle_commits_and_reads_its_own_writes(kv: KvHttp, ns: str) -> None:
    ops = [put(ns, "a", 1), {"op": "get", "ns": ns, "key": "a"},
           {"op": "check", "ns": ns, "key": "b", "expect": 0}]  # fmt: skip
    body = {"operations": [], "kv": ops}
    res = kv.call("/transaction", body)
    assert res["success"] is True
    assert [r["kvIndex"] for r in res["results"]] == [0, 1, 2]
    assert res["results"][1]["value"] == 1 and res["results"][2]["applied"] is True


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        (
            {"op": "getPrefix", "ns": "ok", "prefix": "a"},
            "kv_get_prefix_not_allowed_in_transaction",
        ),
        ({"op": "put", "ns": "Bad", "key": "k", "value": 1, "ttlSeconds": 5}, "kv_bad_namespace"),
        ({"op": "put", "ns": "ok", "key": "k", "value": 1}, "kv_expiry_not_specified"),
    ],
)
def test_a_malformed_rider_is_a_400_and_nothing_commits(
    kv: KvHttp, queues: QueueHttp, ns: str, op: dict[str, Any], reason: str
) -> None:
    queue = f"q-{ns}"
    before = kv.rows()
    body = {"operations": [pushes(queue, 1)], "kv": [put(ns, "first", 1), op]}
    refused = kv.refused("/transaction", body)
    assert (refused["code"], refused["reason"]) == ("kv_bad_request", reason)
    assert kv.rows() == before
    assert queues.pop(queue, wait="false") == []
    too_many = {"operations": [], "kv": [put(ns, f"k{i}", i) for i in range(65)]}
    assert kv.refused("/transaction", too_many)["reason"] == "kv_too_many_ops"
