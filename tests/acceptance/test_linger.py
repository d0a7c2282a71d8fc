"""Linger against the real server (docs/architecture.md, "Linger: batches under load"):
under a fast trickle of single pushes a long-polling consumer leaves with batches, while a
lone message of an idle queue is still answered at once; with POLL_LINGER_MAX_MS=0 the same
trickle is answered about one message per pop."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.support.server import ServerProcess

MESSAGES = 150
EVERY_S = 0.002  # one push every 2 ms (as the machine lets): busier than one per LINGER_MS
LINGER_MS = 300


@pytest.fixture(scope="module")
def servers(pg_admin_dsn: str, template_db: str) -> Iterator[dict[int, ServerProcess]]:
    from tests.conftest import database_from_template

    with (
        database_from_template(pg_admin_dsn, template_db) as dsn,
        # a long cap, for a difference the test can see whatever the machine's speed: the
        # mechanism is tested here, not its default (bench (x) measures that)
        ServerProcess(dsn, workers=1, POLL_LINGER_MAX_MS=LINGER_MS) as lingering,
        ServerProcess(dsn, workers=1, POLL_LINGER_MAX_MS=0) as eager,
    ):
        yield {LINGER_MS: lingering, 0: eager}


class Consumer(threading.Thread):
    """Long-polls one queue (batch 50) and acks each batch until it has `expect` messages."""

    def __init__(self, url: str, queue: str, expect: int) -> None:
        super().__init__(daemon=True)
        self.url, self.queue, self.expect = url, queue, expect
        self.pops: list[int] = []
        self.arrived: dict[str, float] = {}

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=15) as client:
            deadline = time.monotonic() + 60
            while len(self.arrived) < self.expect and time.monotonic() < deadline:
                r = client.get(
                    f"/api/v1/pop/queue/{self.queue}",
                    params={"batch": 50, "wait": "true", "timeout": 5000},
                )
                if r.status_code == 204:
                    continue
                messages = r.json()["messages"]
                now = time.monotonic()
                self.pops.append(len(messages))
                for m in messages:
                    self.arrived[m["transactionId"]] = now
                acks = [ack_of(m) for m in messages]
                assert client.post("/api/v1/ack/batch", json={"acknowledgments": acks}).is_success


def ack_of(message: dict[str, str]) -> dict[str, str]:
    keys = ("transactionId", "partitionId", "leaseId")
    return {**{k: message[k] for k in keys}, "status": "completed"}


def trickle(url: str, queue: str) -> dict[str, float]:
    """MESSAGES single pushes to one partition, one every EVERY_S (as far as the machine
    lets); the time each push was answered."""
    pushed: dict[str, float] = {}
    with httpx.Client(base_url=url, timeout=15) as client:
        start = time.monotonic()
        for k in range(MESSAGES):
            ahead = start + k * EVERY_S - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)  # pacing the producer, not waiting for an outcome
            tid = str(uuid.uuid4())
            item = {"queue": queue, "partition": "p0", "payload": k, "transactionId": tid}
            assert client.post("/api/v1/push", json={"items": [item]}).status_code == 201
            pushed[tid] = time.monotonic()
    return pushed


def consume_a_trickle(server: ServerProcess) -> tuple[Consumer, dict[str, float]]:
    queue = f"linger-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(server.url, queue, MESSAGES)
    consumer.start()
    pushed = trickle(server.url, queue)
    consumer.join(60)
    assert set(consumer.arrived) == set(pushed), "every message arrives, once"
    return consumer, pushed


def test_a_busy_partition_is_answered_in_batches(servers: dict[int, ServerProcess]) -> None:
    lingering, _ = consume_a_trickle(servers[LINGER_MS])
    eager, _ = consume_a_trickle(servers[0])
    per_pop = MESSAGES / len(lingering.pops)
    eager_per_pop = MESSAGES / len(eager.pops)
    print(f"messages per pop: linger {per_pop:.1f}, without {eager_per_pop:.1f}")
    assert per_pop > 3 * eager_per_pop


def test_a_lone_message_of_an_idle_queue_is_not_held_back(
    servers: dict[int, ServerProcess],
) -> None:
    url = servers[LINGER_MS].url
    consumer_of_a_busy_queue, _ = consume_a_trickle(servers[LINGER_MS])  # another queue
    assert consumer_of_a_busy_queue.pops
    queue = f"idle-{uuid.uuid4().hex[:8]}"
    got: list[httpx.Response] = []
    params = {"wait": "true", "timeout": 5000}
    poll = f"{url}/api/v1/pop/queue/{queue}"
    waiter = threading.Thread(target=lambda: got.append(httpx.get(poll, params=params, timeout=15)))
    waiter.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the long poll is registered
        if httpx.get(f"{url}/metrics").json()["longPolling"]["registry"]["intentions"] >= 1:
            break
        time.sleep(0.01)
    pushed_at = time.monotonic()
    item = {"queue": queue, "payload": "alone"}
    assert httpx.post(f"{url}/api/v1/push", json={"items": [item]}).status_code == 201
    waiter.join(10)
    answered = time.monotonic() - pushed_at
    assert got and got[0].status_code == 200
    assert answered < 0.5  # not the linger's business: a quiet partition is popped at once
