"""A queue's maxSize through HTTP: per-item reason, Retry-After, the rejection counter, and
transactions (rolled back with the same answer)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from queen_threads.queue.capacity import RETRY_AFTER_S
from tests.integration.conftest import AdminApi, uuid4


def rejected(queue: str, reason: str = "queue_full") -> float:
    labels = {"queue": queue, "reason": reason}
    return REGISTRY.get_sample_value("queen_push_rejected_total", labels) or 0.0


def items(queue: str, *payloads: int) -> list[dict[str, object]]:
    return [{"queue": queue, "payload": p, "transactionId": uuid4()} for p in payloads]


def test_a_full_queue_refuses_per_item_with_a_reason_and_retry_after(admin: AdminApi) -> None:
    admin.configure("capq", maxSize=2)
    first = admin.post("/push", {"items": items("capq", 1)})
    assert first.status_code == 201 and "Retry-After" not in first.headers
    counted = rejected("capq")

    res = admin.post("/push", {"items": items("capq", 2, 3) + items("free", 4)})
    assert res.status_code == 201
    assert res.headers["Retry-After"] == str(RETRY_AFTER_S)
    full, full2, free = res.json
    for item in (full, full2):
        assert (item["status"], item["reason"]) == ("failed", "queue_full")
        assert item["message_id"] is None
        assert "would exceed its maximum size of 2 messages" in item["error"]
    assert free["status"] == "queued" and "reason" not in free and "error" not in free
    assert rejected("capq") == counted + 2
    assert admin.get("/resources/queues/capq").json["messages"]["total"] == 1

    # consuming makes room again; the answer no longer asks to wait
    [m] = admin.pop("capq")
    admin.ack(m)
    res = admin.post("/push", {"items": items("capq", 2, 3)})
    assert [r["status"] for r in res.json] == ["queued", "queued"]
    assert "Retry-After" not in res.headers


def test_a_transaction_pushing_into_a_full_queue_rolls_back_with_the_same_answer(
    admin: AdminApi,
) -> None:
    admin.configure("capt", maxSize=1)
    admin.push("capt", [1])
    counted = rejected("capt")
    res = admin.post("/transaction", {"operations": [
        {"type": "push", "items": items("other", 1)},
        {"type": "push", "items": items("capt", 2)},
    ]})  # fmt: skip
    assert res.status_code == 409
    assert res.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert res.json["success"] is False and "maximum size" in res.json["error"]
    refused = res.json["results"][-1]
    assert (refused["status"], refused["reason"]) == ("failed", "queue_full")
    assert rejected("capt") == counted + 1
    # rolled back: nothing of it stored, not even the push into the other queue
    assert admin.get("/resources/queues/other").status_code == 404
    assert admin.get("/resources/queues/capt").json["messages"]["total"] == 1


def test_the_counter_is_exposed_on_the_prometheus_route(admin: AdminApi) -> None:
    admin.configure("capm", maxSize=1)
    admin.push("capm", [1])
    admin.post("/push", {"items": items("capm", 2)})
    text = admin.client.simulate_get("/metrics/prometheus").text
    assert 'queen_push_rejected_total{queue="capm",reason="queue_full"} 1.0' in text
