"""OpenTelemetry against the real gunicorn -k gevent server (2 worker processes) exporting
over OTLP/HTTP to a receiver in this process (tests/support/otlp.py, the protobuf decoded):
a producer's trace continues through the queue to its consumer, the server's spans carry
the messaging semantic conventions, a database call is a child of its request's span, and
a long poll's span covers its wait and says when a push from another process woke it."""

from __future__ import annotations

import secrets
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.acceptance.test_long_poll import wait_registered
from tests.support.otlp import Receiver, Span, otlp_receiver
from tests.support.server import ServerProcess

SERVER = 2  # SpanKind.SERVER in the protobuf enum
CLIENT = 3


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as found:
        yield found


@pytest.fixture(scope="module")
def srv(module_dsn: str, receiver: Receiver) -> Iterator[ServerProcess]:
    with ServerProcess(
        module_dsn,
        workers=2,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        OTEL_SERVICE_NAME="queen-under-test",
        OTEL_TRACES_SAMPLER="parentbased_always_on",
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_METRICS_EXPORTER="otlp",
        OTEL_METRIC_EXPORT_INTERVAL="500",
    ) as server:
        yield server


def traceparent() -> tuple[str, str, str]:
    """A new W3C context: (header, trace id, span id)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def qname() -> str:
    return f"otel-{uuid.uuid4().hex[:10]}"


def children(receiver: Receiver, parent: Span) -> list[Span]:
    return [s for s in receiver.spans if s.parent_span_id == parent.span_id]


def test_a_message_trace_goes_from_its_producer_through_push_and_pop(
    srv: ServerProcess, receiver: Receiver
) -> None:
    q = qname()
    produced, p_trace, p_span = traceparent()
    with httpx.Client(base_url=srv.url, timeout=10) as producer:
        items = [{"queue": q, "payload": {"n": 1}}, {"queue": q, "payload": {"n": 2}}]
        r = producer.post(
            "/api/v1/push", json={"items": items}, headers={"traceparent": produced,
                                                             "tracestate": "vendor=1"}
        )  # fmt: skip
        assert r.status_code == 201, r.text
    consumed, c_trace, c_span = traceparent()
    with httpx.Client(base_url=srv.url, timeout=10) as consumer:  # another connection
        params = {"batch": 10, "wait": "false", "consumerGroup": "billing"}
        r = consumer.get(f"/api/v1/pop/queue/{q}", params=params, headers={"traceparent": consumed})
        assert r.status_code == 200, r.text
        messages = r.json()["messages"]
        acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                 "leaseId": m["leaseId"], "status": "completed"} for m in messages]  # fmt: skip
        body = {"acknowledgments": acks, "consumerGroup": "billing"}
        acked = consumer.post("/api/v1/ack/batch", json=body, headers={"traceparent": consumed})
        assert acked.status_code == 200, acked.text
    assert [m["traceContext"] for m in messages] == [
        {"traceparent": produced, "tracestate": "vendor=1"}
    ] * 2

    push = receiver.wait_for(lambda s: s.trace_id == p_trace and s.name == f"push {q}")
    assert (push.parent_span_id, push.kind) == (p_span, SERVER)
    assert push.resource["service.name"] == "queen-under-test"
    assert push.attributes["messaging.system"] == "queen"
    assert push.attributes["messaging.operation.type"] == "send"
    assert push.attributes["messaging.operation.name"] == "push"
    assert push.attributes["messaging.destination.name"] == q
    assert push.attributes["messaging.batch.message_count"] == 2
    assert push.attributes["http.route"] == "/api/v1/push"
    assert push.attributes["http.response.status_code"] == 201
    assert push.links == []  # its producer is its parent
    db = receiver.wait_for(lambda s: s.parent_span_id == push.span_id)
    assert (db.kind, db.trace_id, db.name) == (CLIENT, p_trace, "push_messages")
    assert db.attributes["db.system.name"] == "postgresql"

    pop = receiver.wait_for(lambda s: s.trace_id == c_trace and s.name == f"pop {q}")
    assert (pop.parent_span_id, pop.kind) == (c_span, SERVER)
    assert pop.links == [(p_trace, p_span)]  # linked to the producer (once for both)
    assert pop.attributes["messaging.operation.type"] == "receive"
    assert pop.attributes["messaging.destination.name"] == q
    assert pop.attributes["messaging.consumer.group.name"] == "billing"
    assert pop.attributes["messaging.batch.message_count"] == 2
    assert receiver.wait_for(lambda s: s.parent_span_id == pop.span_id).kind == CLIENT
    ack = receiver.wait_for(lambda s: s.trace_id == c_trace and s.name == f"ack {q}")
    assert ack.parent_span_id == c_span
    assert ack.attributes["messaging.operation.type"] == "settle"
    assert ack.attributes["messaging.batch.message_count"] == 2


def test_a_long_poll_span_covers_its_wait_and_says_when_a_push_woke_it(
    srv: ServerProcess, receiver: Receiver
) -> None:
    q = qname()
    consumed, c_trace, c_span = traceparent()
    answer: dict[str, Any] = {}

    def wait() -> None:
        answer["response"] = httpx.get(
            f"{srv.url}/api/v1/pop/queue/{q}",
            params={"wait": "true", "timeout": "20000"},
            headers={"traceparent": consumed},
            timeout=30,
        )

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    wait_registered(srv.url, 1)
    produced, p_trace, p_span = traceparent()
    pushed_at = time.time_ns()
    script = (
        "import httpx, sys; r = httpx.post(sys.argv[1] + '/api/v1/push', json={'items': "
        "[{'queue': sys.argv[2], 'payload': 'later'}]}, headers={'traceparent': sys.argv[3]});"
        "assert r.status_code == 201, r.text"
    )
    subprocess.run([sys.executable, "-c", script, srv.url, q, produced], check=True, timeout=30)
    waiter.join(30)
    response = answer["response"]
    assert response.status_code == 200, response.text
    assert response.json()["messages"][0]["traceContext"] == {"traceparent": produced}

    pop = receiver.wait_for(lambda s: s.trace_id == c_trace and s.name == f"pop {q}")
    assert pop.parent_span_id == c_span and pop.links == [(p_trace, p_span)]
    assert pop.start_ns < pushed_at < pop.end_ns  # the span covers the wait
    events = {name: at for name, at, _ in pop.events}
    assert set(events) == {"queen.wait.start", "queen.wait.woken"}
    assert events["queen.wait.start"] < pushed_at < events["queen.wait.woken"]
    assert pop.attributes["messaging.batch.message_count"] == 1
    push = receiver.wait_for(lambda s: s.trace_id == p_trace and s.name == f"push {q}")
    assert push.parent_span_id == p_span


def test_no_traceparent_means_a_root_span_and_no_context_on_the_message(
    srv: ServerProcess, receiver: Receiver
) -> None:
    q = qname()
    r = httpx.post(f"{srv.url}/api/v1/push", json={"items": [{"queue": q, "payload": 1}]})
    assert r.status_code == 201
    r = httpx.get(f"{srv.url}/api/v1/pop/queue/{q}", params={"wait": "false"})
    assert r.json()["messages"][0]["traceContext"] is None
    push = receiver.wait_for(lambda s: s.name == f"push {q}")
    pop = receiver.wait_for(lambda s: s.name == f"pop {q}")
    assert push.parent_span_id == "" and pop.parent_span_id == "" and pop.links == []
    assert push.trace_id != pop.trace_id
    health = receiver.wait_for(lambda s: s.name == "GET /health")
    assert health.attributes["http.route"] == "/health"
    assert "messaging.system" not in health.attributes


def test_metrics_go_out_over_otlp_when_asked_for(srv: ServerProcess, receiver: Receiver) -> None:
    q = qname()
    r = httpx.post(f"{srv.url}/api/v1/push", json={"items": [{"queue": q, "payload": 1}]})
    assert r.status_code == 201

    def has_sent(batch: dict[str, Any]) -> bool:
        for rm in batch.get("resourceMetrics", []):
            for sm in rm.get("scopeMetrics", []):
                for metric in sm.get("metrics", []):
                    if metric["name"] != "messaging.client.sent.messages":
                        continue
                    for point in metric["sum"]["dataPoints"]:
                        attrs = {a["key"]: a["value"].get("stringValue")
                                 for a in point.get("attributes", [])}  # fmt: skip
                        if attrs.get("messaging.destination.name") == q:
                            return True
        return False

    receiver.wait_metrics(has_sent)
