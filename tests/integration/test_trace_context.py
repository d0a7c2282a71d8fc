"""A message's W3C trace context through the queue (issue 34, docs/observability.md): what a
push carries (its `traceparent` / `tracestate` headers, or an item's own fields) comes back
as the message's `traceContext` on every pop path, through HTTP (falcon's in-process client
over a real Runtime on real PostgreSQL). An invalid traceparent is ignored and counted,
never a 400."""

from __future__ import annotations

import uuid
from typing import Any

import falcon.testing

from queen_threads.metrics.definitions import prom
from tests.integration.conftest import API, AdminApi

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
STATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
CONTEXT = {"traceparent": PARENT, "tracestate": STATE}
HEADERS = {"traceparent": PARENT, "tracestate": STATE}


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def post(admin: AdminApi, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    res = admin.client.simulate_post(f"{API}{path}", json=body, headers=headers or {})
    assert res.status_code in (200, 201), res.text
    return res.json


def push(
    admin: AdminApi, queue: str, items: list[dict[str, Any]], headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    results = post(admin, "/push", {"items": [{"queue": queue, **i} for i in items]}, headers)
    assert [r["status"] for r in results] == ["queued"] * len(items), results
    return list(results)


def popped(res: falcon.testing.Result) -> list[dict[str, Any]]:
    assert res.status_code == 200, res.text
    return list(res.json["messages"])


def contexts(messages: list[dict[str, Any]]) -> list[Any]:
    return [m["traceContext"] for m in messages]


def invalid_count(source: str) -> float:
    value = prom().trace_context_invalid.labels(source)._value.get()
    return float(value)


def test_the_headers_context_comes_back_on_queue_partition_and_group_pops(admin: AdminApi) -> None:
    q, q2 = name("tc"), name("tc")
    push(admin, q, [{"payload": 1}], HEADERS)
    push(admin, q, [{"payload": 3}])  # no context: null, the key is there
    push(admin, q2, [{"payload": 1}, {"payload": 2, "partition": "p2"}], HEADERS)
    by_queue = popped(admin.get(f"/pop/queue/{q}", batch=10, wait="false"))
    assert contexts(by_queue) == [CONTEXT, None]
    by_partition = popped(admin.get(f"/pop/queue/{q2}/partition/p2", wait="false"))
    assert contexts(by_partition) == [CONTEXT]
    group = popped(
        admin.get(f"/pop/queue/{q}", batch=10, wait="false", consumerGroup="g1",
                  subscriptionMode="all")
    )  # fmt: skip
    assert contexts(group) == [CONTEXT, None]


def test_namespace_task_and_long_poll_pops_carry_it(admin: AdminApi) -> None:
    ns = name("ns")
    q = f"{ns}.work"
    push(admin, q, [{"payload": "a"}], {"traceparent": PARENT})
    by_namespace = popped(admin.get("/pop", namespace=ns, wait="false", consumerGroup="n"))
    assert contexts(by_namespace) == [{"traceparent": PARENT}]
    by_task = popped(admin.get("/pop", task="work", namespace=ns, wait="true", timeout=5000))
    assert contexts(by_task) == [{"traceparent": PARENT}]


def test_an_items_own_fields_win_over_the_headers(admin: AdminApi) -> None:
    q = name("tc")
    push(
        admin, q,
        [{"payload": 1, "traceparent": OTHER},
         {"payload": 2, "traceparent": OTHER, "tracestate": "a=1"},
         {"payload": 3}],
        HEADERS,
    )  # fmt: skip
    messages = popped(admin.get(f"/pop/queue/{q}", batch=10, wait="false"))
    assert contexts(messages) == [
        {"traceparent": OTHER},
        {"traceparent": OTHER, "tracestate": "a=1"},
        CONTEXT,
    ]


def test_invalid_contexts_are_ignored_and_counted_never_refused(admin: AdminApi) -> None:
    q = name("tc")
    headers_before, items_before = invalid_count("header"), invalid_count("item")
    push(admin, q, [{"payload": 1}], {"traceparent": "00-zzz", "tracestate": STATE})
    push(
        admin, q,
        [{"payload": 2, "traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"},
         {"payload": 3, "traceparent": 42},
         {"payload": 4, "traceparent": PARENT, "tracestate": "bad\u0001state"},
         {"payload": 5, "traceparent": "ff" + PARENT[2:]}],
    )  # fmt: skip
    messages = popped(admin.get(f"/pop/queue/{q}", batch=10, wait="false"))
    assert contexts(messages) == [None, None, None, {"traceparent": PARENT}, None]
    assert invalid_count("header") == headers_before + 1
    assert invalid_count("item") == items_before + 3
    assert admin.sql("SELECT count(*) FROM queen.messages WHERE trace_context IS NOT NULL") == [
        (1,)
    ]


def test_a_transactions_pushes_keep_the_requests_context(admin: AdminApi) -> None:
    q = name("tc")
    items = [{"queue": q, "payload": 1}, {"queue": q, "payload": 2, "traceparent": OTHER}]
    ops = [{"type": "push", "items": items}]
    assert post(admin, "/transaction", {"operations": ops}, HEADERS)["success"] is True
    messages = popped(admin.get(f"/pop/queue/{q}", batch=10, wait="false"))
    assert contexts(messages) == [CONTEXT, {"traceparent": OTHER}]


def test_stream_windows_carry_it(admin: AdminApi) -> None:
    q, stream = name("sq"), name("st")
    admin.configure(q)
    body = {"name": stream, "source_queue_names": [q], "window_type": "count",
            "window_size_count": 2}  # fmt: skip
    assert admin.post("/stream/define", body).status_code == 201
    push(admin, q, [{"payload": 1}, {"payload": 2, "traceparent": OTHER}], HEADERS)
    res = admin.post("/stream/poll", {"streamName": stream, "consumerGroup": "g", "timeout": 0})
    assert res.status_code == 200, res.text
    assert contexts(res.json["window"]["messages"]) == [CONTEXT, {"traceparent": OTHER}]


def test_offset_reads_carry_it(admin: AdminApi) -> None:
    q = name("rq")
    push(admin, q, [{"payload": 1}], HEADERS)
    push(admin, q, [{"payload": 2}])
    entry = {"queue": q, "partition": "Default", "offset": 0}
    records = post(admin, "/fetch", {"entries": [entry]})["entries"][0]["records"]
    assert contexts(records) == [CONTEXT, None]


def test_ephemeral_queues_carry_it(admin: AdminApi) -> None:
    q = name("eq")
    post(admin, "/ephemeral/configure", {"queue": q, "options": {}})
    messages = [{"payload": 1}, {"payload": 2, "traceparent": OTHER}, {"payload": 3,
                "traceparent": "nope"}]  # fmt: skip
    post(admin, "/ephemeral/push", {"queue": q, "messages": messages}, HEADERS)
    post(admin, "/ephemeral/push", {"queue": q, "messages": [{"payload": 4}]})
    res = admin.client.simulate_get(f"{API}/ephemeral/pop", params={"queue": q, "batch": 10})
    assert contexts(popped(res)) == [CONTEXT, {"traceparent": OTHER}, None, None]


def test_a_dlq_requeue_keeps_it(admin: AdminApi) -> None:
    q = name("dq")
    admin.configure(q, retryLimit=0, deadLetterQueue=True)
    push(admin, q, [{"payload": 1}], HEADERS)
    [message] = admin.pop(q)
    admin.ack(message, "failed", "boom")
    res = admin.post(f"/messages/{message['partitionId']}/{message['transactionId']}/retry")
    assert res.status_code in (200, 201), res.text
    [again] = admin.pop(q)
    assert again["traceContext"] == CONTEXT


def test_the_streaming_sdks_source_pop_carries_it(admin: AdminApi) -> None:
    """The SDK's source is a group pop over several partitions (the official clients'
    runner: `consumerGroup`, `partitions=4`, `batch=200`), its messages kept as they come."""
    q = name("sdk")
    push(admin, q, [{"payload": 1, "partition": "a"}, {"payload": 2, "partition": "b",
                    "traceparent": OTHER}], HEADERS)  # fmt: skip
    res = admin.get(f"/pop/queue/{q}", batch=200, partitions=4, wait="false",
                    consumerGroup="streams.q1", subscriptionMode="all")  # fmt: skip
    by_partition = {m["partition"]: m["traceContext"] for m in popped(res)}
    assert by_partition == {"a": CONTEXT, "b": {"traceparent": OTHER}}
