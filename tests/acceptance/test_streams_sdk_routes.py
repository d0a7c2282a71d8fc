"""The streaming SDK's routes over real HTTP (the gunicorn server) on real PostgreSQL, as the
official clients' runtime calls them: POST /streams/v1/queries, /streams/v1/cycle and
/streams/v1/state/get, plus GET /streams/v1/queries and DELETE /streams/v1/queries/{name}.
Every refusal answers {success: false, error} with its real status, and the test reads the
database around it to prove that it changed nothing (state, sink, source cursor, lease)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support.server import ServerProcess
from tests.support.streams_sdk import sql

V1 = "/streams/v1"


class Sdk:
    """The routes, plus the source queue, its pops and the database behind the server."""

    def __init__(self, server: ServerProcess, name: Callable[[str], str]) -> None:
        self.http = httpx.Client(base_url=server.url, timeout=10)
        self.dsn = server.env["DATABASE_URL"]
        self.source, self.sink, self.query = name("src"), name("sink"), name("q")
        self.group = f"streams.{self.query}"

    def post(self, path: str, body: Any) -> httpx.Response:
        return self.http.post(f"{V1}{path}", json=body)

    def register(self, config_hash: str = "h1", **extra: Any) -> httpx.Response:
        body = {
            "name": self.query,
            "source_queue": self.source,
            "config_hash": config_hash,
            "reset": False,
            **extra,
        }
        return self.post("/queries", body)

    def query_id(self) -> str:
        res = self.register()
        assert res.status_code == 200, res.text
        return str(res.json()["query_id"])

    def push(self, n: int, partition: str = "p1", queue: str | None = None) -> None:
        items = [
            {"queue": queue or self.source, "partition": partition, "payload": {"i": i}}
            for i in range(n)
        ]
        assert self.http.post("/api/v1/push", json={"items": items}).status_code == 201

    def pop(self, batch: int = 10) -> list[dict[str, Any]]:
        params = {"batch": batch, "wait": "false", "consumerGroup": self.group}
        res = self.http.get(f"/api/v1/pop/queue/{self.source}", params=params)
        return list(res.json()["messages"]) if res.status_code == 200 else []

    def cycle(self, qid: str, messages: list[dict[str, Any]], **fields: Any) -> httpx.Response:
        last = messages[-1]
        body = {
            "query_id": qid,
            "partition_id": last["partitionId"],
            "consumer_group": self.group,
            "state_ops": [{"type": "upsert", "key": "w\x1f1", "value": {"acc": len(messages)}}],
            "push_items": [{"queue": self.sink, "partition": "p1", "payload": {"n": 1}}],
            "ack": {
                "transactionId": last["transactionId"],
                "leaseId": last["leaseId"],
                "status": "completed",
                "count": len(messages),
            },
            "release_lease": True,
        }
        return self.post("/cycle", {**body, **fields})

    def cycles_counted(self, outcome: str) -> float:
        """queen_sdk_cycles_total{outcome} summed over the server's processes."""
        text = self.http.get("/metrics/prometheus").text
        prefix = f'queen_sdk_cycles_total{{outcome="{outcome}"}} '
        return sum(
            float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)
        )

    def snapshot(self) -> dict[str, Any]:
        """Everything a cycle may change: state, shards, the source cursor and lease, the
        sink's messages."""
        return {
            "state": sql(
                self.dsn,
                "SELECT s.partition_id, s.key, s.value FROM queen.sdk_state s"
                " JOIN queen.sdk_queries q ON q.id = s.query_id WHERE q.name = %s"
                " ORDER BY 1, 2",
                self.query,
            ),
            "shards": sql(
                self.dsn,
                "SELECT s.* FROM queen.sdk_shards s JOIN queen.sdk_queries q"
                " ON q.id = s.query_id WHERE q.name = %s ORDER BY 2",
                self.query,
            ),
            "cursor": sql(
                self.dsn,
                "SELECT pc.last_consumed_id, pc.lease_id, pc.batch_ids,"
                " pc.acked_ids FROM queen.partition_consumers pc"
                " WHERE pc.consumer_group = %s ORDER BY pc.partition_id",
                self.group,
            ),
            "sink": sql(
                self.dsn,
                "SELECT m.id FROM queen.messages m JOIN queen.partitions p"
                " ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id"
                " WHERE q.name = %s ORDER BY 1",
                self.sink,
            ),
        }

    def refused(self, res: httpx.Response, status: int, before: dict[str, Any]) -> str:
        assert res.status_code == status, res.text
        body = res.json()
        assert body["success"] is False and body["error"], body
        assert self.snapshot() == before
        return str(body["error"])


@pytest.fixture
def sdk(client_server: ServerProcess, unique: Callable[[str], str]) -> Iterator[Sdk]:
    api = Sdk(client_server, unique)
    yield api
    api.http.close()


# ------------------------------------------------------------------------ registration


def test_registration_is_idempotent_and_a_new_shape_needs_reset(sdk: Sdk) -> None:
    first = sdk.register(sink_queue=sdk.sink)
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["success"] is True and body["fresh"] is True and body["reset"] is False
    assert body["name"] == sdk.query and uuid.UUID(body["query_id"])
    again = sdk.register().json()
    assert again["query_id"] == body["query_id"] and again["fresh"] is False

    sdk.push(1)
    msgs = sdk.pop()
    assert sdk.cycle(body["query_id"], msgs).status_code == 200
    before = sdk.snapshot()
    assert before["state"]
    error = sdk.refused(sdk.register(config_hash="h2"), 409, before)
    assert "config_hash" in error and sdk.query in error
    # reset with the same shape keeps the state; with a new one drops it.
    same = sdk.register(reset=True).json()
    assert same["reset"] is False and sdk.snapshot()["state"] == before["state"]
    wiped = sdk.register(config_hash="h2", reset=True).json()
    assert wiped["reset"] is True and wiped["query_id"] == body["query_id"]
    assert sdk.snapshot()["state"] == [] and sdk.snapshot()["shards"] == []
    assert sdk.register(config_hash="h2").json()["fresh"] is False


@pytest.mark.parametrize(
    "body",
    [
        {"source_queue": "q", "config_hash": "h"},
        {"name": "has space", "source_queue": "q", "config_hash": "h"},
        {"name": "n", "config_hash": "h"},
        {"name": "n", "source_queue": "q", "config_hash": ""},
        {"name": "n", "source_queue": "q", "config_hash": 7},
        {"name": "n", "source_queue": "q", "config_hash": "h", "reset": "yes"},
    ],
)
def test_a_malformed_registration_is_a_400_that_registers_nothing(
    sdk: Sdk, body: dict[str, Any]
) -> None:
    count = "SELECT count(*) FROM queen.sdk_queries"
    before = sql(sdk.dsn, count)
    res = sdk.post("/queries", body)
    assert res.status_code == 400, res.text
    assert res.json()["success"] is False and res.json()["error"]
    assert sql(sdk.dsn, count) == before


# ----------------------------------------------------------------------------- cycles


def test_a_cycle_commits_state_sink_and_ack_together(sdk: Sdk) -> None:
    qid = sdk.query_id()
    sdk.push(3)
    msgs = sdk.pop()
    assert len(msgs) == 3
    res = sdk.cycle(qid, msgs)
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["success"] is True and body["state_ops_applied"] == 1
    assert [r["status"] for r in body["push_results"]] == ["queued"]
    assert body["ack_result"] == {
        "success": True,
        "count": 3,
        "status": "completed",
        "lease_released": True,
    }
    after = sdk.snapshot()
    assert [(k, v) for _, k, v in after["state"]] == [("w\x1f1", {"acc": 3})]
    assert len(after["sink"]) == 1
    [(last_id, lease, _batch, _acked)] = after["cursor"]
    assert str(last_id) == max((m["id"] for m in msgs), key=int) and lease is None
    assert sdk.pop() == []  # nothing left to deliver


def test_a_retried_cycle_is_refused_because_its_lease_is_gone(sdk: Sdk) -> None:
    """The client retries a cycle whose answer it lost: applying it twice would emit twice."""
    qid = sdk.query_id()
    sdk.push(2)
    msgs = sdk.pop()
    committed, refused = sdk.cycles_counted("committed"), sdk.cycles_counted("refused")
    assert sdk.cycle(qid, msgs).status_code == 200
    before = sdk.snapshot()
    assert "lease" in sdk.refused(sdk.cycle(qid, msgs), 409, before).lower()
    assert sdk.cycles_counted("committed") == committed + 1
    assert sdk.cycles_counted("refused") == refused + 1


def test_a_cycle_under_a_lease_that_is_not_the_callers_changes_nothing(sdk: Sdk) -> None:
    qid = sdk.query_id()
    sdk.push(2)
    msgs = sdk.pop()
    before = sdk.snapshot()
    foreign = [{**m, "leaseId": str(uuid.uuid4())} for m in msgs]
    sdk.refused(sdk.cycle(qid, foreign), 409, before)
    # Expired: the partition may be someone else's by now.
    sql(
        sdk.dsn,
        "UPDATE queen.partition_consumers SET lease_expires_at = now() - interval '1 s'"
        " WHERE consumer_group = %s",
        sdk.group,
    )
    expired = sdk.snapshot()
    sdk.refused(sdk.cycle(qid, msgs), 409, expired)
    # A message that was never delivered under the lease.
    again = sdk.pop()
    assert [m["id"] for m in again] == [m["id"] for m in msgs]
    stranger = {**again[-1], "transactionId": "not-delivered"}
    sdk.refused(sdk.cycle(qid, [*again[:-1], stranger]), 409, sdk.snapshot())


def test_a_cycle_naming_a_message_acked_already_is_refused(sdk: Sdk) -> None:
    """E.g. the retry of a gate's partial cycle whose head was acked out of delivery order:
    the lease is still live, but that message is done."""
    qid = sdk.query_id()
    sdk.push(3)
    msgs = sdk.pop()
    middle = msgs[1]
    ack = {
        "transactionId": middle["transactionId"],
        "partitionId": middle["partitionId"],
        "leaseId": middle["leaseId"],
        "consumerGroup": sdk.group,
        "status": "completed",
    }
    res = sdk.http.post("/api/v1/ack", json=ack)
    assert res.status_code == 200 and "already_acked" not in res.text, res.text
    before = sdk.snapshot()
    sdk.refused(sdk.cycle(qid, msgs[:2], release_lease=False), 409, before)


def race(sdk: Sdk, body: dict[str, Any]) -> list[int]:
    """Send `body` to /streams/v1/cycle twice at the same moment (two connections); the
    two statuses, sorted."""
    barrier = threading.Barrier(2)
    url = f"{sdk.http.base_url}{V1}/cycle"

    def send(_: int) -> int:
        barrier.wait()
        return httpx.post(url, json=body, timeout=10).status_code

    with ThreadPoolExecutor(2) as pool:
        return sorted(pool.map(send, range(2)))


def test_the_same_cycle_sent_twice_at_once_commits_once(sdk: Sdk) -> None:
    """A retry overtaking its original (or a duplicating proxy): the partition's row lock
    lets one in; the other finds the lease gone."""
    qid = sdk.query_id()
    sdk.push(2)
    msgs = sdk.pop()
    last = msgs[-1]
    body = {
        "query_id": qid,
        "partition_id": last["partitionId"],
        "consumer_group": sdk.group,
        "state_ops": [{"type": "upsert", "key": "w", "value": {"acc": 2}}],
        "push_items": [{"queue": sdk.sink, "partition": "p1", "payload": {"n": 2}}],
        "ack": {"transactionId": last["transactionId"], "leaseId": last["leaseId"]},
    }
    assert race(sdk, body) == [200, 409]
    after = sdk.snapshot()
    assert len(after["sink"]) == 1 and len(after["state"]) == 1


def test_two_flushes_of_one_window_at_once_emit_it_once(sdk: Sdk) -> None:
    """Ack-less cycles race on the state row: the second finds the window deleted."""
    qid = sdk.query_id()
    sdk.push(1)
    msgs = sdk.pop()
    window = [{"type": "upsert", "key": "w", "value": {"acc": 1, "windowEnd": 1}}]
    assert sdk.cycle(qid, msgs, state_ops=window, push_items=[]).status_code == 200
    flush = {
        "query_id": qid,
        "partition_id": msgs[0]["partitionId"],
        "state_ops": [{"type": "delete", "key": "w"}],
        "push_items": [{"queue": sdk.sink, "partition": "p1", "payload": {"acc": 1}}],
        "ack": None,
    }
    assert race(sdk, flush) == [200, 409]
    after = sdk.snapshot()
    assert len(after["sink"]) == 1 and after["state"] == []


def test_a_delete_of_state_that_is_gone_refuses_the_whole_cycle(sdk: Sdk) -> None:
    """The window was emitted by someone else since the caller read it (e.g. a flush)."""
    qid = sdk.query_id()
    sdk.push(2)
    msgs = sdk.pop()
    before = sdk.snapshot()
    ops = [{"type": "upsert", "key": "a", "value": 1}, {"type": "delete", "key": "gone"}]
    error = sdk.refused(sdk.cycle(qid, msgs, state_ops=ops), 409, before)
    assert "gone" in error
    ok = sdk.cycle(qid, msgs, state_ops=[{"type": "upsert", "key": "gone", "value": 2}])
    assert ok.status_code == 200, ok.text
    flush = {
        "query_id": qid,
        "partition_id": msgs[0]["partitionId"],
        "consumer_group": sdk.group,
        "state_ops": [{"type": "delete", "key": "gone"}],
        "push_items": [],
        "ack": None,
    }
    assert sdk.post("/cycle", flush).status_code == 200
    after_flush = sdk.snapshot()
    sdk.refused(sdk.post("/cycle", flush), 409, after_flush)  # the same flush, retried


def test_a_full_sink_refuses_the_cycle(sdk: Sdk) -> None:
    res = sdk.http.post("/api/v1/configure", json={"queue": sdk.sink, "options": {"maxSize": 1}})
    assert res.status_code == 200
    sdk.push(1, queue=sdk.sink)
    qid = sdk.query_id()
    sdk.push(2)
    msgs = sdk.pop()
    before = sdk.snapshot()
    assert "push" in sdk.refused(sdk.cycle(qid, msgs), 409, before).lower()


@pytest.mark.parametrize("release", [True, False])
def test_a_partial_ack_keeps_the_lease_only_when_asked(sdk: Sdk, release: bool) -> None:
    """A gate acks the head it allowed; release_lease false keeps the tail leased."""
    qid = sdk.query_id()
    sdk.push(3)
    msgs = sdk.pop()
    res = sdk.cycle(qid, msgs[:2], release_lease=release, push_items=[])
    assert res.status_code == 200, res.text
    assert res.json()["ack_result"]["lease_released"] is release
    [(last_id, lease, _batch, _)] = sdk.snapshot()["cursor"]
    assert str(last_id) == msgs[1]["id"]
    assert (lease is None) is release
    if release:  # a lease the server freed: renewing it says so (200), it is not unknown
        renewed = sdk.http.post(f"/api/v1/lease/{msgs[0]['leaseId']}/extend", json={})
        assert renewed.status_code == 200 and renewed.json()["success"] is False, renewed.text
    tail = sdk.pop()
    assert [m["id"] for m in tail] == ([msgs[2]["id"]] if release else [])


@pytest.mark.parametrize(
    "fields",
    [
        {"query_id": "not-a-uuid"},
        {"partition_id": None},
        {"state_ops": {"type": "upsert"}},
        {"state_ops": [{"type": "merge", "key": "k", "value": 1}]},
        {"state_ops": [{"type": "upsert", "key": "k"}]},
        {"state_ops": [{"type": "delete"}]},
        {"state_ops": [{"type": "upsert", "key": "é" * 1025, "value": 1}]},
        {"push_items": [{"payload": {}}]},
        {"ack": "yes"},
        {"ack": {"transactionId": "t", "leaseId": "not-a-uuid"}},
        {"release_lease": "no"},
    ],
)
def test_a_malformed_cycle_is_a_400_that_changes_nothing(sdk: Sdk, fields: dict[str, Any]) -> None:
    qid = sdk.query_id()
    sdk.push(1)
    msgs = sdk.pop()
    before = sdk.snapshot()
    sdk.refused(sdk.cycle(qid, msgs, **fields), 400, before)


def test_a_cycle_for_an_unknown_query_or_partition_is_a_404(sdk: Sdk) -> None:
    qid = sdk.query_id()
    sdk.push(1)
    msgs = sdk.pop()
    before = sdk.snapshot()
    sdk.refused(sdk.cycle(str(uuid.uuid4()), msgs), 404, before)
    sdk.refused(sdk.cycle(qid, [{**msgs[0], "partitionId": str(uuid.uuid4())}]), 404, before)


# ------------------------------------------------------------------------------- state


def test_state_get_filters_by_keys_prefix_and_ripeness(sdk: Sdk) -> None:
    qid = sdk.query_id()
    sdk.push(1)
    msgs = sdk.pop()
    ops = [
        {"type": "upsert", "key": "t\x1f100%", "value": {"windowEnd": 100}},
        {"type": "upsert", "key": "t\x1f200", "value": {"windowEnd": 200}},
        {"type": "upsert", "key": "tx\x1f50", "value": {"windowEnd": 50}},
        {"type": "upsert", "key": "__wm__", "value": {"eventTimeMs": 7}},
    ]
    assert sdk.cycle(qid, msgs, state_ops=ops).status_code == 200
    pid = msgs[0]["partitionId"]

    def keys(**filters: Any) -> list[str]:
        res = sdk.post("/state/get", {"query_id": qid, "partition_id": pid, **filters})
        assert res.status_code == 200, res.text
        assert res.json()["success"] is True
        return [r["key"] for r in res.json()["rows"]]

    assert keys(keys=[]) == ["__wm__", "t\x1f100%", "t\x1f200", "tx\x1f50"]
    assert keys(keys=["__wm__", "missing"]) == ["__wm__"]
    assert keys(keys=[], key_prefix="t\x1f") == ["t\x1f100%", "t\x1f200"]
    assert keys(key_prefix="t\x1f1%") == []  # the prefix is literal, not a LIKE pattern
    assert keys(key_prefix="t\x1f", ripe_at_or_before=150) == ["t\x1f100%"]
    assert keys(ripe_at_or_before=60) == ["tx\x1f50"]
    other = sdk.post("/state/get", {"query_id": qid, "partition_id": str(uuid.uuid4())})
    assert other.json() == {"success": True, "rows": []}


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"query_id": "x", "partition_id": str(uuid.uuid4())}, 400),
        ({"partition_id": str(uuid.uuid4())}, 400),
        ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()), "keys": [1]}, 400),
        (
            {
                "query_id": str(uuid.uuid4()),
                "partition_id": str(uuid.uuid4()),
                "ripe_at_or_before": "soon",
            },
            400,
        ),
        ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4())}, 404),
    ],
)
def test_state_get_refusals(sdk: Sdk, body: dict[str, Any], status: int) -> None:
    res = sdk.post("/state/get", body)
    assert res.status_code == status, res.text
    assert res.json()["success"] is False and res.json()["error"]


# ---------------------------------------------------------------- listing, retention


def test_queries_are_listed_with_state_size_and_lag_and_deleted_with_their_state(
    sdk: Sdk,
) -> None:
    qid = sdk.query_id()
    sdk.push(3)
    msgs = sdk.pop(batch=1)
    assert sdk.cycle(qid, msgs).status_code == 200
    listed = {q["name"]: q for q in sdk.http.get(f"{V1}/queries").json()["queries"]}
    mine = listed[sdk.query]
    assert mine["queryId"] == qid and mine["sourceQueue"] == sdk.source
    assert mine["stateRows"] == 1 and mine["stateBytes"] > 0
    assert mine["lag"] == 2 and mine["cycles"] == 1 and mine["acked"] == 1
    assert mine["consumerGroup"] == sdk.group

    res = sdk.http.delete(f"{V1}/queries/{sdk.query}")
    assert res.status_code == 200 and res.json()["deleted"] is True
    assert sdk.snapshot()["state"] == [] and sdk.snapshot()["shards"] == []
    missing = sdk.http.delete(f"{V1}/queries/{sdk.query}")
    assert missing.status_code == 404 and missing.json()["success"] is False


def test_deleting_a_source_partition_or_queue_deletes_its_state(sdk: Sdk) -> None:
    qid = sdk.query_id()
    for partition in ("p1", "p2"):
        sdk.push(1, partition=partition)
        msgs = sdk.pop()
        assert sdk.cycle(qid, msgs).status_code == 200
    kept = sdk.snapshot()["state"]
    assert len(kept) == 2
    # A partition goes (what partition cleanup does): its state goes with it.
    gone = kept[0][0]
    sql(sdk.dsn, "DELETE FROM queen.partitions WHERE id = %s", gone)
    assert [row[0] for row in sdk.snapshot()["state"]] == [kept[1][0]]
    res = sdk.http.delete(f"/api/v1/resources/queues/{sdk.source}")
    assert res.status_code == 200, res.text
    assert sdk.snapshot()["state"] == [] and sdk.snapshot()["shards"] == []
    assert sdk.register().json()["fresh"] is False  # the query itself stays
