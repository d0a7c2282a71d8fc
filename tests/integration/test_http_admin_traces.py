"""POST /api/v1/traces and the trace reads through HTTP."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.integration.conftest import AdminApi


def trace_body(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "transactionId": message["transactionId"],
        "partitionId": message["partition_id"],
        "data": {"step": 1},
        **extra,
    }


def test_record_and_read_traces_of_a_message(admin: AdminApi) -> None:
    [m] = admin.push("tq", ["x"])
    first = admin.post(
        "/traces",
        trace_body(m, traceNames=["order-1", "tenant-a", "order-1"], consumerGroup="g1",
                   eventType="processing"),
    )  # fmt: skip
    assert first.status_code == 201
    assert first.json["success"] is True and uuid.UUID(first.json["traceId"])
    second = admin.post("/traces", trace_body(m, data={"step": 2}, traceNames="order-1"))
    third = admin.post("/traces", trace_body(m, data=[1, "any json"], traceNames=None))
    assert second.status_code == third.status_code == 201

    res = admin.get(f"/traces/{m['partition_id']}/{m['transactionId']}")
    assert res.status_code == 200
    body = res.json
    assert (body["partitionId"], body["transactionId"]) == (m["partition_id"], m["transactionId"])
    traces = body["traces"]
    assert [t["data"] for t in traces] == [{"step": 1}, {"step": 2}, [1, "any json"]]
    t0 = traces[0]
    assert t0["id"] == first.json["traceId"]
    assert t0["traceNames"] == ["order-1", "tenant-a"]
    assert (t0["consumerGroup"], t0["eventType"], t0["queue"], t0["partition"]) == (
        "g1", "processing", "tq", "Default",
    )  # fmt: skip
    assert traces[1]["eventType"] == "info" and traces[1]["traceNames"] == ["order-1"]
    assert traces[2]["traceNames"] == [] and t0["createdAt"].endswith("Z")


def test_message_without_traces_and_unknown_message(admin: AdminApi) -> None:
    [m] = admin.push("tn", ["x"])
    empty = admin.get(f"/traces/{m['partition_id']}/{m['transactionId']}")
    assert empty.status_code == 200 and empty.json["traces"] == []
    missing = admin.get(f"/traces/{m['partition_id']}/nope")
    assert missing.status_code == 404 and missing.json == {"error": "Message not found"}
    assert admin.get(f"/traces/not-a-uuid/{m['transactionId']}").status_code == 400


def test_trace_for_an_unknown_message_is_404_and_stores_nothing(admin: AdminApi) -> None:
    [m] = admin.push("tu", ["x"])
    before = admin.snapshot()
    for body in (
        trace_body({**m, "transactionId": "nope"}),
        trace_body({**m, "partition_id": str(uuid.uuid4())}),
    ):
        res = admin.post("/traces", body)
        assert res.status_code == 404 and res.json == {"error": "Message not found"}
    assert admin.snapshot() == before


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"transactionId": None}, "transactionId and partitionId are required"),
        ({"partitionId": None}, "transactionId and partitionId are required"),
        ({"transactionId": 12}, "transactionId and partitionId are required"),
        ({"data": None}, "data is required"),
        ({"partitionId": "garbage"}, "partitionId"),
        ({"traceNames": 5}, "traceNames"),
        ({"traceNames": ["ok", 7]}, "trace name"),
        ({"traceNames": [""]}, "trace name"),
        ({"traceNames": ["n"] * 101}, "traceNames"),
        ({"eventType": 3}, "eventType"),
        ({"consumerGroup": ["g"]}, "consumerGroup"),
    ],
)
def test_bad_trace_body_is_400(admin: AdminApi, change: dict[str, Any], error: str) -> None:
    [m] = admin.push("tb", ["x"])
    body = {k: v for k, v in {**trace_body(m), **change}.items() if v is not None}
    before = admin.snapshot()
    res = admin.post("/traces", body)
    assert res.status_code == 400 and error in res.json["error"]
    assert admin.snapshot() == before


def test_trace_body_must_be_a_json_object(admin: AdminApi) -> None:
    admin.push("tj", ["x"])
    before = admin.snapshot()
    for raw in (b"", b"{oops", b'"text"'):
        res = admin.post("/traces", raw=raw)
        assert res.status_code == 400 and res.json["error"]
    assert admin.snapshot() == before


def test_traces_by_name_pages_newest_first_with_total(admin: AdminApi) -> None:
    pushed = admin.push("tp", list(range(5)))
    for i, m in enumerate(pushed):
        assert (
            admin.post("/traces", trace_body(m, data={"i": i}, traceNames=["batch"])).status_code
            == 201
        )
    admin.post("/traces", trace_body(pushed[0], traceNames=["other"]))
    admin.sql(
        "UPDATE queen.message_traces SET created_at = '2025-01-01'::timestamptz"
        " + make_interval(secs => (data ->> 'i')::int) WHERE data ? 'i'"
    )
    seen = []
    for offset in (0, 2, 4):
        body = admin.get("/traces/by-name/batch", limit=2, offset=offset).json
        assert body["total"] == 5 and body["traceName"] == "batch"
        assert body["pagination"] == {"limit": 2, "offset": offset}
        seen += [t["data"]["i"] for t in body["traces"]]
    assert seen == [4, 3, 2, 1, 0]
    unknown = admin.get("/traces/by-name/nothing").json
    assert unknown["traces"] == [] and unknown["total"] == 0
    assert admin.get("/traces/by-name/batch", limit=0).status_code == 400
    assert admin.get("/traces/by-name/batch", offset=-3).status_code == 400
    assert admin.get(f"/traces/by-name/{'n' * 300}").status_code == 400


def test_trace_names_with_counts_most_recent_first(admin: AdminApi) -> None:
    [m] = admin.push("tnm", ["x"])
    for names in (["a", "b"], ["a"], ["c"]):
        admin.post("/traces", trace_body(m, traceNames=names))
    admin.sql(
        """UPDATE queen.message_traces t SET created_at = now() - interval '1 hour'
            WHERE EXISTS (SELECT 1 FROM queen.message_trace_names n
                           WHERE n.trace_id = t.id AND n.trace_name = 'b')"""
    )
    body = admin.get("/traces/names").json
    assert body["total"] == 3 and body["pagination"] == {"limit": 50, "offset": 0}
    assert [(n["name"], n["traceCount"]) for n in body["names"]] == [("c", 1), ("a", 2), ("b", 1)]
    assert body["names"][0]["lastSeen"].endswith("Z")
    page = admin.get("/traces/names", limit=1, offset=1).json
    assert [n["name"] for n in page["names"]] == ["a"] and page["total"] == 3
    assert admin.get("/traces/names", limit="many").status_code == 400
