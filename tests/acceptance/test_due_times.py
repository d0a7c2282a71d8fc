"""Everything that becomes available at a known time reaches the long poll waiting then,
in another instance, within 50 ms of its due time (docs/architecture.md, "Due times").

Two server instances (two worker processes each) on one database. Every round's next long
poll waits in the other instance than the one where the message was last handled; half of
the rounds start it before the event that sets the due time, half after. Both instances
poll slowly by themselves (`SLOW_POLLING`: a group's backoff poll comes 5-10 s after the
last), so a delivery on time can only come from a due time: with the poll worker's timers
left out (`group.backoff.timer = None` in PollIntentionRegistry.record_round), the first
retry round's long poll was answered 204 at its 10 s timeout.

Each due time is read from what the database stored (a lease's end, a retry's
availability) or from the message's creation time (delayedProcessing, windowBuffer), and
the delivery time is taken when the answer was read, on the same host's clock.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import psycopg2
import pytest

from tests.acceptance.test_long_poll import SLOW_POLLING, wait_registered
from tests.conftest import database_from_template
from tests.support.server import ServerProcess, side_by_side

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)

ROUNDS = 8  # 2 of each (pusher, waiter first or not) pair; each round waits ~1 s
LATE_MS = 50.0  # the longest a delivery may come after its due time
EARLY_MS = 2.0  # clock reading noise; anything earlier is a bug


class Instances:
    def __init__(self, servers: list[ServerProcess], dsn: str) -> None:
        self.servers = servers
        self.db = psycopg2.connect(dsn)
        self.db.autocommit = True

    def value(self, query: str, *args: Any) -> Any:
        with self.db.cursor() as cur:
            cur.execute(query, args)
            row = cur.fetchone()
            assert row is not None
            return row[0]


@pytest.fixture(scope="module")
def instances(pg_admin_dsn: str, template_db: str) -> Iterator[Instances]:
    with (
        database_from_template(pg_admin_dsn, template_db) as dsn,
        side_by_side(dsn, **SLOW_POLLING) as servers,
    ):
        warm_up(servers)
        found = Instances(servers, dsn)
        yield found
        found.db.close()


def warm_up(servers: list[ServerProcess]) -> None:
    """A few long polls in every worker process, one of them delivered and the others
    empty with a due time: a fresh process's first pops plan the stored functions on its
    connections (tens of ms on a busy machine), which the rounds are not about."""
    q = f"due-warm-{uuid.uuid4().hex[:8]}"
    configure(servers[0].url, q, leaseTime=1)
    push(servers[0].url, q)
    for srv in servers:
        polls = [Waiter(srv.url, q, timeout_ms=300) for _ in range(8)]
        for poll in polls:
            poll.start()
        for poll in polls:
            poll.join(20)
            assert poll.response is not None and poll.response.status_code in (200, 204)
    warm_up_retries(servers)


def warm_up_retries(servers: list[ServerProcess]) -> None:
    """A message failed and redelivered across the instances a few times (retryDelay 50 ms):
    the retry's paths (a failed ack, the due-time pop that redelivers it) plan on first use
    too; a full suite's run saw the first measured retry round 72 ms late, the next seven
    4-9 ms."""
    q = f"due-warm-retry-{uuid.uuid4().hex[:8]}"
    configure(servers[0].url, q, retryStrategy="fixed", retryDelay=50, retryJitter=0,
              retryLimit=100, leaseTime=30)  # fmt: skip
    txid = push(servers[0].url, q)
    r = httpx.get(f"{servers[0].url}/api/v1/pop/queue/{q}")
    assert r.status_code == 200, r.text
    message, holder = r.json()["messages"][0], 0
    for status in ["failed"] * 6 + ["completed"]:
        ack = {"transactionId": txid, "partitionId": message["partitionId"],
               "leaseId": message["leaseId"], "status": status}  # fmt: skip
        assert httpx.post(f"{servers[holder].url}/api/v1/ack", json=ack).is_success
        if status == "completed":
            return
        holder = 1 - holder
        poll = Waiter(servers[holder].url, q)
        poll.start()
        message = poll.message()
        assert message["transactionId"] == txid


class Waiter(threading.Thread):
    """A long poll; `received_at` is the wall-clock time its answer was read."""

    def __init__(self, url: str, queue: str, timeout_ms: int = 10000) -> None:
        super().__init__(daemon=True)
        self.url = f"{url}/api/v1/pop/queue/{queue}"
        self.params = {"wait": "true", "timeout": str(timeout_ms)}
        self.response: httpx.Response | None = None
        self.received_at = 0.0

    def run(self) -> None:
        self.response = httpx.get(self.url, params=self.params, timeout=20)
        self.received_at = time.time()

    def message(self) -> dict[str, Any]:
        self.join(20)
        assert self.response is not None and self.response.status_code == 200, self.response
        [message] = self.response.json()["messages"]
        return dict(message)


def configure(url: str, queue: str, **options: Any) -> None:
    r = httpx.post(f"{url}/api/v1/configure", json={"queue": queue, "options": options})
    assert r.status_code == 200, r.text


def push(url: str, queue: str) -> str:
    txid = uuid.uuid4().hex
    r = httpx.post(
        f"{url}/api/v1/push",
        json={"items": [{"queue": queue, "transactionId": txid, "payload": {"t": txid}}]},
    )
    assert r.status_code == 201 and r.json()[0]["status"] == "queued", r.text
    return txid


def created_at(message: dict[str, Any]) -> float:
    return datetime.fromisoformat(message["createdAt"].replace("Z", "+00:00")).timestamp()


def lateness_ms(received_at: float, due: float) -> float:
    return (received_at - due) * 1000.0


def assert_on_time(kind: str, late: list[float]) -> None:
    shown = ", ".join(f"{ms:.1f}" for ms in late)
    print(f"{kind} lateness (ms): {shown}")  # shown with -s: the measurement itself
    assert len(late) == ROUNDS
    assert all(-EARLY_MS <= ms <= LATE_MS for ms in late), f"{kind} lateness (ms): {shown}"


def wait(instances: Instances, index: int, queue: str, before: bool) -> Waiter:
    """A long poll in instance `index`; registered before returning when `before`."""
    waiter = Waiter(instances.servers[index].url, queue)
    waiter.start()
    if before:
        wait_registered(instances.servers[index].url, 1)
    return waiter


def test_a_retry_reaches_a_long_poll_in_the_other_instance_on_time(
    instances: Instances,
) -> None:
    q = f"due-retry-{uuid.uuid4().hex[:8]}"
    a = instances.servers[0].url
    configure(a, q, retryStrategy="fixed", retryDelay=300, retryJitter=0, retryLimit=100,
              leaseTime=30)  # fmt: skip
    txid = push(a, q)
    r = httpx.get(f"{a}/api/v1/pop/queue/{q}")
    assert r.status_code == 200
    message, holder = r.json()["messages"][0], 0
    late: list[float] = []
    for n in range(ROUNDS):
        other = 1 - holder
        before = n % 2 == 1  # waiting while the message is leased, or arriving after the ack
        waiter = wait(instances, other, q, before) if before else None
        ack = {"transactionId": txid, "partitionId": message["partitionId"],
               "leaseId": message["leaseId"], "status": "failed", "error": str(n)}  # fmt: skip
        r = httpx.post(f"{instances.servers[holder].url}/api/v1/ack", json=ack)
        assert r.status_code == 200 and r.json()[0]["status"] == "failed_retry", r.text
        due = instances.value(
            "SELECT extract(epoch FROM retry_available_at) FROM queen.partition_consumers"
            " WHERE partition_id = %s",
            message["partitionId"],
        )
        if waiter is None:
            waiter = wait(instances, other, q, before)
        message, holder = waiter.message(), other
        assert message["transactionId"] == txid
        late.append(lateness_ms(waiter.received_at, float(due)))
    assert_on_time("retry", late)


@pytest.mark.parametrize("option", ["delayedProcessing", "windowBuffer"])
def test_a_delayed_message_reaches_a_long_poll_in_the_other_instance_on_time(
    instances: Instances, option: str
) -> None:
    """delayedProcessing: a message is offered once it is that old; windowBuffer: once its
    partition has had no newer message for that long. Both are due at createdAt + 1 s."""
    q = f"due-{option}-{uuid.uuid4().hex[:8]}"
    configure(instances.servers[0].url, q, **{option: 1})
    late: list[float] = []
    for n in range(ROUNDS):
        pusher = n % 2
        before = n % 4 >= 2
        waiter = wait(instances, 1 - pusher, q, before) if before else None
        txid = push(instances.servers[pusher].url, q)
        if waiter is None:
            waiter = wait(instances, 1 - pusher, q, before)
        message = waiter.message()
        assert message["transactionId"] == txid
        late.append(lateness_ms(waiter.received_at, created_at(message) + 1.0))
        ack = {"transactionId": txid, "partitionId": message["partitionId"],
               "leaseId": message["leaseId"], "status": "completed"}  # fmt: skip
        assert httpx.post(f"{instances.servers[1 - pusher].url}/api/v1/ack", json=ack).is_success
    assert_on_time(option, late)


def test_an_expired_lease_reaches_a_long_poll_in_the_other_instance_on_time(
    instances: Instances,
) -> None:
    """Each delivery's consumer never acknowledges: its lease (1 s) runs out, and the long
    poll waiting in the other instance gets the message then."""
    q = f"due-lease-{uuid.uuid4().hex[:8]}"
    a = instances.servers[0].url
    configure(a, q, leaseTime=1, retryLimit=1000)
    txid = push(a, q)
    r = httpx.get(f"{a}/api/v1/pop/queue/{q}")
    assert r.status_code == 200
    message, holder = r.json()["messages"][0], 0
    late: list[float] = []
    for _ in range(ROUNDS):
        due = instances.value(
            "SELECT extract(epoch FROM lease_expires_at) FROM queen.partition_consumers"
            " WHERE lease_id = %s",
            message["leaseId"],
        )
        other = 1 - holder
        waiter = wait(instances, other, q, before=False)
        message, holder = waiter.message(), other
        assert message["transactionId"] == txid
        late.append(lateness_ms(waiter.received_at, float(due)))
    assert_on_time("lease", late)
