"""The queue store's observer on real PostgreSQL: `QueueStore` tells the one it was given
what each call did, after the call (push, pop, ack, transaction, a message it could not
decrypt), and `QueueMetrics` counts it in Prometheus, the JSON counters and the analytics
minutes; the timers' fire counts its stored messages as pushes."""

from __future__ import annotations

import uuid
from typing import Any

from prometheus_client import REGISTRY

from queen_threads.crypto import PayloadCipher
from queen_threads.db import Database
from queen_threads.metrics.counters import ProcessCounters
from queen_threads.metrics.minutes import QueueMinutes
from queen_threads.queue.metrics import QueueMetrics
from queen_threads.queue.store import QueueStore

KEY_A = "a" * 64
KEY_B = "b" * 64


class Recorder:
    """A QueueObserver that keeps what it heard."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, Any]] = []

    def pushed(self, items: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
        pairs = zip(items, results, strict=True)
        self.heard.append(("pushed", [(i["queue"], r["status"]) for i, r in pairs]))

    def popped(self, results: list[dict[str, Any]]) -> None:
        self.heard.append(("popped", [len(r.get("messages") or ()) for r in results]))

    def acked(self, results: list[dict[str, Any]]) -> None:
        self.heard.append(("acked", [r["success"] for r in results]))

    def transacted(self, result: dict[str, Any]) -> None:
        self.heard.append(("transacted", result["success"]))

    def decryption_failed(self, message: dict[str, Any], reason: str) -> None:
        self.heard.append(("decryption_failed", message["queue"]))


def item(queue: str, payload: Any = 1) -> dict[str, Any]:
    return {"queue": queue, "partition": "P", "payload": payload,
            "transactionId": str(uuid.uuid4())}  # fmt: skip


def pop(store: QueueStore, queue: str, batch: int = 1) -> list[dict[str, Any]]:
    [result] = store.pop([{"queue": queue, "batch": batch, "leaseId": str(uuid.uuid4())}])
    assert len(result["messages"]) == batch
    return list(result["messages"])


def ack_of(message: dict[str, Any]) -> dict[str, Any]:
    return {"transactionId": message["transactionId"], "partitionId": message["partitionId"],
            "status": "completed", "consumerGroup": "__QUEUE_MODE__",
            "leaseId": message.get("leaseId")}  # fmt: skip


def test_the_store_tells_its_observer_what_each_call_did(database: Database) -> None:
    recorder = Recorder()
    store = QueueStore(database, observer=recorder)
    queue = f"qm-{uuid.uuid4().hex[:8]}"
    store.push([item(queue), item(queue)])
    [message] = pop(store, queue)
    store.ack([ack_of(message)])
    store.transaction([{"type": "push", "items": [item(queue)]}])
    assert recorder.heard == [
        ("pushed", [(queue, "queued"), (queue, "queued")]),
        ("popped", [1]),
        ("acked", [True]),
        ("transacted", True),
    ]


def test_a_message_that_cannot_be_decrypted_is_told(database: Database) -> None:
    queue = f"qm-{uuid.uuid4().hex[:8]}"
    writer = QueueStore(database, PayloadCipher(KEY_A))
    writer.configure({"queue": queue, "options": {"encryptionEnabled": True}})
    writer.push([item(queue, {"pin": 1})])
    recorder = Recorder()
    pop(QueueStore(database, PayloadCipher(KEY_B), recorder), queue)
    assert recorder.heard == [("decryption_failed", queue), ("popped", [1])]


def prom(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_queue_metrics_count_the_stores_calls_and_the_timers_stores(database: Database) -> None:
    counters, minutes = ProcessCounters(), QueueMinutes()
    metrics = QueueMetrics(counters, minutes)
    store = QueueStore(database, observer=metrics)
    queue = f"qm-{uuid.uuid4().hex[:8]}"
    pushed = ("queen_messages_pushed_total", {"queue": queue, "status": "queued"})
    popped = ("queen_messages_popped_total", {"queue": queue})
    # A transaction's ack result names no queue (50_transaction.sql): by queue, only the
    # plain ack is counted; the process's total counts both.
    acked = ("queen_messages_acked_total", {"queue": queue, "status": "completed"})

    store.push([item(queue), item(queue)])
    first, second = pop(store, queue, 2)
    store.ack([ack_of(first)])
    ops = [{"type": "push", "items": [item(queue)]}, {"type": "ack", **ack_of(second)}]
    assert store.transaction(ops)["success"] is True
    metrics.stored_by_timers({queue: 2})

    assert prom(*pushed) == 5 and prom(*popped) == 2 and prom(*acked) == 1
    assert (counters.pushed.total, counters.popped.total, counters.acked.total) == (5, 2, 2)
    [row] = minutes.drain()
    assert {k: row.get(k) for k in ("queue", "pushed", "popped", "acked")} == {
        "queue": queue, "pushed": 5, "popped": 2, "acked": 1,
    }  # fmt: skip
