"""The stream routes through HTTP (falcon's in-process client over a real Runtime on real
PostgreSQL): every route's answer and its refusals, and that a refused request changes no
stream row.

Most tests use count windows, which are ready as soon as their messages are pushed; the
time-window tests insert messages with explicit created_at values (event time) directly.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import falcon.testing
import pytest

from tests.integration.conftest import AdminApi

STREAM_TABLES = ("streams", "stream_sources", "stream_consumer_offsets", "stream_leases")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EMPTY: dict[str, list[Any]] = {t: [] for t in STREAM_TABLES}


# --------------------------------------------------------------------------- helpers


def stream_rows(admin: AdminApi) -> dict[str, list[tuple[Any, ...]]]:
    return {t: admin.sql(f"SELECT * FROM queen.{t} ORDER BY 1, 2") for t in STREAM_TABLES}


def define(admin: AdminApi, name: str, sources: list[str], **opts: Any) -> falcon.testing.Result:
    return admin.post("/stream/define", {"name": name, "source_queue_names": sources, **opts})


def count_stream(admin: AdminApi, name: str, queue: str, size: int = 2, **opts: Any) -> None:
    res = define(admin, name, [queue], window_type="count", window_size_count=size, **opts)
    assert res.status_code == 201, res.text


def poll(admin: AdminApi, stream: str, group: str = "g", timeout: int = 0) -> falcon.testing.Result:
    body = {"streamName": stream, "consumerGroup": group, "timeout": timeout}
    return admin.post("/stream/poll", body)


def window(admin: AdminApi, stream: str, group: str = "g") -> dict[str, Any]:
    res = poll(admin, stream, group)
    assert res.status_code == 200, res.text
    assert set(res.json) == {"window"}
    return dict(res.json["window"])


def ack(admin: AdminApi, lease: str, success: bool = True) -> falcon.testing.Result:
    return admin.post("/stream/ack", {"leaseId": lease, "success": success})


def error(res: falcon.testing.Result, status: int) -> str:
    assert res.status_code == status, res.text
    return str(res.json["error"])


def datas(w: dict[str, Any]) -> list[Any]:
    return [m["data"] for m in w["messages"]]


def put_at(admin: AdminApi, queue: str, at_ms: int, data: Any) -> None:
    """A message of `queue`'s Default partition created at epoch ms `at_ms`."""
    admin.sql(
        """INSERT INTO queen.messages (transaction_id, partition_id, payload, created_at)
           SELECT %s, p.id, to_jsonb(%s::text), %s FROM queen.partitions p
             JOIN queen.queues q ON q.id = p.queue_id
            WHERE q.name = %s AND p.name = 'Default'""",
        str(uuid.uuid4()),
        str(data),
        EPOCH + timedelta(milliseconds=at_ms),
        queue,
    )


def iso(at_ms: int) -> str:
    return (EPOCH + timedelta(milliseconds=at_ms)).isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------- define


def test_define_creates_keeps_replaces_and_refuses_a_change_once_consumed(
    admin: AdminApi,
) -> None:
    admin.configure("src")
    admin.configure("other")
    res = define(admin, "st", ["src"])
    assert res.status_code == 201, res.text
    assert res.json["created"] is True and res.json["changed"] is True
    stream = res.json["stream"]
    assert {k: v for k, v in stream.items() if k not in ("id", "created_at", "updated_at")} == {
        "name": "st",
        "namespace": "",
        "partitioned": False,
        "window_type": "tumbling",
        "window_duration_ms": 60000,
        "window_slide_ms": None,
        "window_size_count": None,
        "window_grace_period_ms": 30000,
        "window_lease_timeout_ms": 60000,
        "source_queue_names": ["src"],
    }

    res = define(admin, "st", ["src"], window_duration_ms=60000)  # the same, spelt out
    assert res.status_code == 200
    assert res.json == {"created": False, "changed": False, "stream": stream}

    res = define(admin, "st", ["other", "src"], window_type="count", window_size_count=1)
    assert res.status_code == 200, res.text
    assert res.json["changed"] is True and res.json["stream"]["id"] == stream["id"]
    assert res.json["stream"]["source_queue_names"] == ["other", "src"]
    assert res.json["stream"]["window_duration_ms"] is None

    admin.push("src", [1])
    window(admin, "st")  # the group has an offset now
    before = stream_rows(admin)
    res = define(admin, "st", ["src"], window_type="count", window_size_count=5)
    assert "has consumers" in error(res, 409)
    assert stream_rows(admin) == before


def test_define_with_missing_sources_is_404_and_creates_nothing(admin: AdminApi) -> None:
    admin.configure("present")
    res = define(admin, "nf", ["zeta", "present", "alpha"])
    assert error(res, 404) == "Source queue(s) not found: alpha, zeta"
    assert stream_rows(admin) == EMPTY


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"window_type": "hopping"}, "window_type must be one of"),
        ({"window_type": "sliding", "window_duration_ms": 1000, "window_slide_ms": 2000},
         "window_slide_ms must be an integer from 1 to 1000"),
        ({"window_type": "sliding", "window_duration_ms": 1000}, "window_slide_ms is required"),
        ({"window_type": "count"}, "window_size_count is required"),
        ({"window_type": "count", "window_size_count": 0}, "window_size_count must be"),
        ({"window_type": "count", "window_size_count": 2, "window_duration_ms": 5},
         "does not apply to count windows"),
        ({"window_size_count": 3}, "applies to count windows only"),
        ({"window_slide_ms": 3}, "applies to sliding windows only"),
        ({"window_lease_timeout_ms": 999}, "window_lease_timeout_ms must be"),
        ({"window_grace_period_ms": -1}, "window_grace_period_ms must be"),
        ({"window_duration_ms": "60000"}, "window_duration_ms must be an integer"),
        ({"partitioned": "yes"}, "partitioned"),
        ({"source_queue_names": []}, "source_queue_names must be a list"),
        ({"source_queue_names": "q"}, "source_queue_names must be a list"),
        ({"source_queue_names": None}, "source_queue_names must be a list"),
        ({"source_queue_names": ["bad name"]}, "Invalid queue name"),
        ({"name": "bad/name"}, "Invalid stream name"),
        ({"name": ""}, "Invalid stream name"),
        ({"name": None}, "Stream must be a string"),
        ({"namespace": "a b"}, "Invalid namespace name"),
    ],
)  # fmt: skip
def test_define_refuses_bad_bodies_and_changes_nothing(
    admin: AdminApi, body: dict[str, Any], fragment: str
) -> None:
    admin.configure("q")
    assert define(admin, "kept", ["q"], window_duration_ms=1000).status_code == 201
    before = stream_rows(admin)
    full = {"name": "kept", "source_queue_names": ["q"], **body}
    assert fragment in error(admin.post("/stream/define", full), 400)
    assert stream_rows(admin) == before


def test_define_refuses_a_body_that_is_not_an_object(admin: AdminApi) -> None:
    error(admin.post("/stream/define", raw=b"[1, 2]"), 400)
    error(admin.post("/stream/define", raw=b"{not json"), 400)
    assert stream_rows(admin) == EMPTY


# --------------------------------------------------------------------------- poll and ack


def test_poll_once_answers_204_then_200_and_ack_moves_on(admin: AdminApi) -> None:
    admin.configure("pq")
    count_stream(admin, "ps", "pq")
    started = time.monotonic()
    res = poll(admin, "ps")
    assert res.status_code == 204 and res.text == ""
    assert time.monotonic() - started < 2  # timeout 0 looks once

    pushed = admin.push("pq", [{"n": 1}, {"n": 2}, {"n": 3}])
    w = window(admin, "ps")
    assert datas(w) == [{"n": 1}, {"n": 2}] and w["deliveryCount"] == 1
    assert w["stream"] == "ps" and w["consumerGroup"] == "g" and w["key"] == "__GLOBAL__"
    m = w["messages"][0]
    assert m["transactionId"] == pushed[0]["transactionId"]
    assert m["queue"] == "pq" and m["partition"] == "Default" and m["partitionId"]
    assert {"id", "traceId", "producerSub", "createdAt"} <= set(m)
    assert (w["start"], w["end"]) == (m["createdAt"], w["messages"][1]["createdAt"])
    assert poll(admin, "ps").status_code == 204  # one window out per key

    res = ack(admin, w["leaseId"])
    assert res.status_code == 200, res.text
    assert res.json == {
        "acknowledged": True, "success": True, "stream": "ps", "consumerGroup": "g",
        "key": "__GLOBAL__", "windowId": w["id"], "messages": 2,
        "start": w["start"], "end": w["end"],
    }  # fmt: skip
    assert poll(admin, "ps").status_code == 204  # 1 of 2 messages
    admin.push("pq", [{"n": 4}])
    assert datas(window(admin, "ps")) == [{"n": 3}, {"n": 4}]


def test_nack_redelivers_the_same_window(admin: AdminApi) -> None:
    admin.configure("nq")
    count_stream(admin, "ns", "nq", size=1)
    admin.push("nq", ["a"])
    first = window(admin, "ns")
    res = ack(admin, first["leaseId"], success=False)
    assert res.status_code == 200 and res.json["success"] is False
    again = window(admin, "ns")
    assert again["id"] == first["id"] and again["deliveryCount"] == 2
    assert datas(again) == ["a"]


def test_poll_refusals(admin: AdminApi) -> None:
    assert error(poll(admin, "missing"), 404) == "Stream not found: missing"
    admin.configure("q")
    count_stream(admin, "s", "q")
    bodies = [
        {"streamName": "s"},
        {"consumerGroup": "g"},
        {"streamName": "s", "consumerGroup": "g", "timeout": -1},
        {"streamName": "s", "consumerGroup": "g", "timeout": "10"},
        {"streamName": "s", "consumerGroup": "bad group"},
    ]
    for body in bodies:
        error(admin.post("/stream/poll", body), 400)
    assert stream_rows(admin)["stream_consumer_offsets"] == []


def test_ack_refusals(admin: AdminApi) -> None:
    admin.configure("aq")
    count_stream(admin, "as", "aq", size=1)
    unknown = str(uuid.uuid4())
    assert error(ack(admin, unknown), 400) == f"Invalid lease: {unknown}"
    assert "leaseId" in error(ack(admin, "not-a-uuid"), 400)
    assert "leaseId is required" in error(admin.post("/stream/ack", {}), 400)
    res = admin.post("/stream/ack", {"leaseId": unknown, "x": 1})  # x ignored, and named
    assert error(res, 400) == f"Invalid lease: {unknown}"
    assert res.headers["Queen-Ignored-Parameters"] == "body:x"
    error(admin.post("/stream/ack", {"leaseId": unknown, "success": "no"}), 400)

    admin.push("aq", ["a"])
    w = window(admin, "as")
    admin.sql("UPDATE queen.stream_leases SET lease_expires_at = now() - interval '1 s'")
    before = stream_rows(admin)
    assert error(ack(admin, w["leaseId"]), 400) == f"Invalid lease (expired): {w['leaseId']}"
    assert stream_rows(admin) == before
    again = window(admin, "as")  # the expired window goes out again
    assert again["id"] == w["id"] and again["deliveryCount"] == 2
    assert ack(admin, again["leaseId"]).status_code == 200
    assert error(ack(admin, again["leaseId"]), 400).startswith("Invalid lease")  # ended


def test_renew_lease(admin: AdminApi) -> None:
    admin.configure("rq")
    count_stream(admin, "rs", "rq", size=1, window_lease_timeout_ms=1000)
    unknown = str(uuid.uuid4())
    res = admin.post("/stream/renew-lease", {"leaseId": unknown})
    assert error(res, 404) == f"Lease not found or expired: {unknown}"
    error(admin.post("/stream/renew-lease", {"leaseId": unknown, "extend_ms": 0}), 400)

    admin.push("rq", ["a"])
    w = window(admin, "rs")
    before = datetime.now(UTC)
    res = admin.post("/stream/renew-lease", {"leaseId": w["leaseId"], "extend_ms": 120_000})
    after = datetime.now(UTC)
    assert res.status_code == 200, res.text
    assert set(res.json) == {"leaseId", "windowId", "leaseExpiresAt"}
    assert res.json["leaseId"] == w["leaseId"] and res.json["windowId"] == w["id"]
    expires = datetime.fromisoformat(res.json["leaseExpiresAt"])
    slack = timedelta(milliseconds=5)
    assert before + timedelta(seconds=120) - slack <= expires <= after + timedelta(seconds=120)
    res = admin.post("/stream/renew-lease", {"leaseId": w["leaseId"]})  # default 30 s
    expires = datetime.fromisoformat(res.json["leaseExpiresAt"])
    assert timedelta(seconds=25) < expires - datetime.now(UTC) <= timedelta(seconds=30)

    admin.sql("UPDATE queen.stream_leases SET lease_expires_at = now() - interval '1 s'")
    error(admin.post("/stream/renew-lease", {"leaseId": w["leaseId"]}), 404)


def test_seek(admin: AdminApi) -> None:
    admin.configure("kq")
    b = (int(time.time() * 1000) // 60_000) * 60_000 - 3_600_000
    for at in (100, 1100, 2100, 9000):
        put_at(admin, "kq", b + at, at)
    res = define(admin, "ks", ["kq"], window_duration_ms=1000, window_grace_period_ms=0)
    assert res.status_code == 201
    body = {"streamName": "nope", "consumerGroup": "g", "timestamp": iso(b)}
    assert error(admin.post("/stream/seek", body), 404) == "Stream not found: nope"
    for stamp in ("yesterday", "", 12345, None):
        body = {"streamName": "ks", "consumerGroup": "g", "timestamp": stamp}
        assert "timestamp" in error(admin.post("/stream/seek", body), 400)
    error(admin.post("/stream/seek", {"streamName": "ks", "timestamp": iso(b)}), 400)
    assert stream_rows(admin)["stream_consumer_offsets"] == []

    w = window(admin, "ks")
    assert datas(w) == ["100"]
    res = admin.post(
        "/stream/seek", {"streamName": "ks", "consumerGroup": "g", "timestamp": iso(b + 1500)}
    )
    assert res.status_code == 200, res.text
    assert res.json["stream"] == "ks" and res.json["consumerGroup"] == "g"
    assert res.json["keys"] == 2
    assert datetime.fromisoformat(res.json["timestamp"]) == EPOCH + timedelta(milliseconds=b + 1500)
    assert error(ack(admin, w["leaseId"]), 400).startswith("Invalid lease")  # seek ended it
    assert datas(window(admin, "ks")) == ["2100"]  # aligned up to 2000


# --------------------------------------------------------------------------- admin reads


def test_list_stats_detail_consumers_and_delete(admin: AdminApi) -> None:
    admin.configure("lq")
    count_stream(admin, "a:one@x", "lq", size=1, namespace="ns1")
    count_stream(admin, "b-two", "lq", size=1, partitioned=True)
    admin.push("lq", ["m1", "m2"])

    empty = admin.get("/resources/streams/stats").json
    assert empty == {
        "streams": 2, "partitionedStreams": 1, "sources": 2, "consumerGroups": 0, "keys": 0,
        "activeLeases": 0, "expiredLeases": 0, "releasedWindows": 0, "windowsAcked": 0,
        "messagesAcked": 0, "waitingPolls": 0,
    }  # fmt: skip

    w = window(admin, "a:one@x", "grp:1@z")
    assert w["stream"] == "a:one@x" and w["consumerGroup"] == "grp:1@z"
    assert ack(admin, w["leaseId"]).status_code == 200
    held = window(admin, "a:one@x", "grp:1@z")
    assert datas(held) == ["m2"]
    window(admin, "b-two", "other")

    listed = admin.get("/resources/streams").json["streams"]
    assert [s["name"] for s in listed] == ["a:one@x", "b-two"]
    assert [(s["consumerGroups"], s["activeLeases"]) for s in listed] == [(1, 1), (1, 1)]
    only = admin.get("/resources/streams", namespace="ns1").json["streams"]
    assert [s["name"] for s in only] == ["a:one@x"] and only[0]["namespace"] == "ns1"
    assert admin.get("/resources/streams", namespace="none").json == {"streams": []}
    res = admin.get("/resources/streams", bogus="1")
    assert res.status_code == 200 and res.headers["Queen-Ignored-Parameters"] == "query:bogus"
    error(admin.get("/resources/streams", namespace="a b"), 400)

    stats = admin.get("/resources/streams/stats").json
    assert stats["consumerGroups"] == 2 and stats["keys"] == 2
    assert stats["activeLeases"] == 2 and stats["windowsAcked"] == 1
    assert stats["messagesAcked"] == 1 and stats["waitingPolls"] == 0

    res = admin.get("/resources/streams/a:one@x")
    assert res.status_code == 200, res.text
    detail = res.json
    assert detail["name"] == "a:one@x" and detail["window_size_count"] == 1
    [group] = detail["consumerGroups"]
    assert {k: group[k] for k in ("consumerGroup", "keys", "windowsAcked", "messagesAcked",
                                  "activeLeases")} == {
        "consumerGroup": "grp:1@z", "keys": 1, "windowsAcked": 1, "messagesAcked": 1,
        "activeLeases": 1,
    }  # fmt: skip
    assert group["lastAckedAt"] is not None
    assert error(admin.get("/resources/streams/nope"), 404) == "Stream not found: nope"

    res = admin.get("/resources/streams/a:one@x/consumers")
    assert res.status_code == 200
    [c] = res.json["consumers"]
    assert res.json["stream"] == "a:one@x"
    assert c["consumerGroup"] == "grp:1@z" and c["key"] == "__GLOBAL__"
    assert c["partitionId"] is None and c["windowsAcked"] == 1 and c["messagesAcked"] == 1
    assert c["lease"]["windowId"] == held["id"] and c["lease"]["messages"] == 1
    assert c["lease"]["deliveryCount"] == 1 and c["lease"]["expired"] is False
    assert c["offset"] == c["lastAckedWindowEnd"] is not None
    [pc] = admin.get("/resources/streams/b-two/consumers").json["consumers"]
    assert pc["key"] == pc["partitionId"] and pc["queue"] == "lq"
    assert pc["partition"] == "Default" and pc["lease"] is not None
    assert error(admin.get("/resources/streams/nope/consumers"), 404).startswith("Stream not")
    res = admin.get("/resources/streams/b-two/consumers", x="1")
    assert res.status_code == 200 and res.headers["Queen-Ignored-Parameters"] == "query:x"

    assert error(admin.delete("/resources/streams/nope"), 404) == "Stream not found: nope"
    res = admin.delete("/resources/streams/a:one@x")
    assert res.status_code == 200 and res.json == {"deleted": True, "stream": "a:one@x"}
    assert admin.get("/resources/streams/a:one@x").status_code == 404
    assert error(poll(admin, "a:one@x", "grp:1@z"), 404).startswith("Stream not found")
    rows = stream_rows(admin)
    assert len(rows["streams"]) == 1 and len(rows["stream_leases"]) == 1
    assert admin.delete("/resources/streams/b-two").status_code == 200
    assert stream_rows(admin) == EMPTY


def test_deleting_the_only_source_queue_deletes_the_stream(admin: AdminApi) -> None:
    admin.configure("gone")
    count_stream(admin, "orphan", "gone", size=1)
    admin.push("gone", [1])
    window(admin, "orphan")
    assert admin.delete("/resources/queues/gone").status_code == 200
    assert error(admin.get("/resources/streams/orphan"), 404).startswith("Stream not found")
    assert stream_rows(admin) == EMPTY


# --------------------------------------------------------------------------- long poll


def test_a_waiting_poll_gets_the_window_a_push_completes(admin: AdminApi) -> None:
    admin.configure("wq")
    count_stream(admin, "ws", "wq", size=1)
    answer: list[falcon.testing.Result] = []
    waiter = threading.Thread(target=lambda: answer.append(poll(admin, "ws", timeout=20_000)))
    started = time.monotonic()
    waiter.start()
    deadline = time.monotonic() + 10
    while admin.get("/resources/streams/stats").json["waitingPolls"] != 1:
        assert time.monotonic() < deadline, "the poll never registered"
        time.sleep(0.01)
    assert not answer
    admin.push("wq", ["late"])
    waiter.join(15)
    assert not waiter.is_alive() and answer
    assert answer[0].status_code == 200, answer[0].text
    assert datas(answer[0].json["window"]) == ["late"]
    assert time.monotonic() - started < 15  # woken by the push, not the deadline
    assert admin.get("/resources/streams/stats").json["waitingPolls"] == 0


# --------------------------------------------------------------------------- encryption


def test_windows_of_an_encrypted_source_are_decrypted(
    make_admin: Callable[..., AdminApi],
) -> None:
    admin = make_admin(QUEEN_ENCRYPTION_KEY="ab" * 32)
    admin.configure("secret", encryptionEnabled=True)
    count_stream(admin, "enc", "secret", size=2)
    admin.push("secret", [{"card": "4111"}, "plain"])
    [(stored,)] = admin.sql("SELECT payload::text FROM queen.messages LIMIT 1")
    assert "4111" not in stored  # encrypted at rest
    w = window(admin, "enc")
    assert datas(w) == [{"card": "4111"}, "plain"]
    assert all("isEncrypted" not in m and "decryptionError" not in m for m in w["messages"])
