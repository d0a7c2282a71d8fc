"""The stream metrics through HTTP (in-process falcon client) on real PostgreSQL: windows
delivered (timeout-0 polls and long polls), delivered again after an expired lease, acks by
outcome, the waiting stream polls gauge on /metrics/prometheus, and the stream poll
workers' numbers in the JSON /metrics.

Count windows make readiness independent of the clock: a window of 2 is ready as soon as
its second message is stored.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import falcon.testing
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import AdminApi

GROUP = "g1"


def sample(admin: AdminApi, name: str, **labels: str) -> float:
    """The value of `name{labels}` on /metrics/prometheus (0 when absent)."""
    text = admin.client.simulate_get("/metrics/prometheus").text
    return sum(
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def counters(admin: AdminApi, stream: str) -> dict[str, float]:
    return {
        "delivered": sample(admin, "queen_stream_windows_delivered_total", stream=stream),
        "redelivered": sample(admin, "queen_stream_windows_redelivered_total", stream=stream),
        "success": sample(
            admin, "queen_stream_windows_acked_total", stream=stream, outcome="success"
        ),
        "released": sample(
            admin, "queen_stream_windows_acked_total", stream=stream, outcome="released"
        ),
    }


def moved(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before if after[k] != before[k]}


def define_count_stream(admin: AdminApi, size: int = 2) -> tuple[str, str]:
    queue = f"sm-q-{uuid.uuid4().hex[:8]}"
    stream = f"sm-s-{uuid.uuid4().hex[:8]}"
    admin.configure(queue)
    res = admin.post(
        "/stream/define",
        {
            "name": stream,
            "window_type": "count",
            "window_size_count": size,
            "source_queue_names": [queue],
        },
    )
    assert res.status_code == 201, res.text
    return stream, queue


def poll(admin: AdminApi, stream: str, timeout: int = 0) -> dict[str, Any] | None:
    res = admin.post(
        "/stream/poll", {"streamName": stream, "consumerGroup": GROUP, "timeout": timeout}
    )
    if res.status_code == 204:
        return None
    assert res.status_code == 200, res.text
    return dict(res.json["window"])


def ack(admin: AdminApi, window: dict[str, Any], success: bool = True) -> None:
    res = admin.post("/stream/ack", {"leaseId": window["leaseId"], "success": success})
    assert res.status_code == 200, res.text


def wait_until(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_each_stream_counter_moves_by_exactly_what_happened(admin: AdminApi) -> None:
    stream, queue = define_count_stream(admin)
    other, _ = define_count_stream(admin)
    admin.push(queue, list(range(6)))  # three windows of 2
    start = counters(admin, stream)
    untouched = counters(admin, other)

    first = poll(admin, stream)
    assert first is not None and first["deliveryCount"] == 1
    assert moved(start, counters(admin, stream)) == {"delivered": 1}
    assert poll(admin, stream) is None  # the key's window is out: nothing, nothing counted
    ack(admin, first)
    assert moved(start, counters(admin, stream)) == {"delivered": 1, "success": 1}

    second = poll(admin, stream)
    assert second is not None and second["id"] != first["id"]
    ack(admin, second, success=False)  # given back ...
    again = poll(admin, stream)  # ... and handed out again at once
    assert again is not None and again["start"] == second["start"]
    assert moved(start, counters(admin, stream)) == {"delivered": 3, "success": 1, "released": 1}

    admin.sql(
        "UPDATE queen.stream_leases SET lease_expires_at = now() - interval '1 s' "
        "WHERE lease_id = %s",
        again["leaseId"],
    )
    expired = poll(admin, stream)  # the expired lease's window, delivered again
    assert expired is not None and expired["start"] == second["start"]
    assert expired["deliveryCount"] == again["deliveryCount"] + 1
    res = admin.post("/stream/ack", {"leaseId": again["leaseId"], "success": True})
    assert res.status_code == 400  # the expired lease cannot ack: not counted
    ack(admin, expired)
    assert moved(start, counters(admin, stream)) == {
        "delivered": 4,
        "redelivered": 1,
        "success": 2,
        "released": 1,
    }

    third = poll(admin, stream, timeout=5000)  # a long poll (the stream poll workers)
    assert third is not None
    ack(admin, third)
    assert moved(start, counters(admin, stream)) == {
        "delivered": 5,
        "redelivered": 1,
        "success": 3,
        "released": 1,
    }
    assert moved(untouched, counters(admin, other)) == {}


def test_waiting_stream_polls_are_a_gauge_and_the_json_metrics_show_the_stream_workers(
    admin: AdminApi,
) -> None:
    stream, queue = define_count_stream(admin)
    admin.push(queue, ["alone"])  # half a window: the poll waits
    before = counters(admin, stream)
    assert sample(admin, "queen_stream_polls_waiting") == 0
    answers: list[falcon.testing.Result] = []
    waiter = threading.Thread(
        target=lambda: answers.append(
            admin.post(
                "/stream/poll", {"streamName": stream, "consumerGroup": GROUP, "timeout": 10000}
            )
        )
    )
    waiter.start()
    try:
        wait_until(lambda: sample(admin, "queen_stream_polls_waiting") == 1)
        body = admin.client.simulate_get("/metrics").json
        assert body["streamPolling"]["registry"]["intentions"] == 1
        assert body["longPolling"]["registry"]["intentions"] == 0
        assert {"rounds", "pops", "delivered", "wakeups"} <= set(body["streamPolling"]["totals"])
        assert len(body["streamPolling"]["workers"]) >= 1
    finally:
        admin.push(queue, ["completes it"])  # the window is ready: the waiter is answered
        waiter.join(15)
    assert not waiter.is_alive()
    assert [a.status_code for a in answers] == [200]
    assert sample(admin, "queen_stream_polls_waiting") == 0
    assert moved(before, counters(admin, stream)) == {"delivered": 1}
    totals = admin.client.simulate_get("/metrics").json["streamPolling"]["totals"]
    assert totals["delivered"] >= 1
