"""Scale-out: three server instances on one database share one queue's consumers.

Three independent servers (their own gunicorn master, port and worker processes, nothing
in front of them) on one migrated database. Producers push a few thousand messages to four
partitions of one queue, spread over the instances, in single and small batches, while
long-polling consumers on all three instances pop (queue mode, batch 10) and acknowledge
every batch with its lease. Meanwhile probe long polls measure how fast a push on one
instance answers a long poll waiting on another.

Every instance polls slowly by itself (`SLOW_POLLING`: a group's next pop comes 5-10 s
after the last), so a prompt answer to a waiting long poll can only come from a wake-up:
with the wake-ups of other processes broken, the probes come back seconds late and the
test fails (checked by leaving out `self.queues.sinks.append(self.notifier)` in
queen_threads/runtime.py: every probe answered 204 at its 8 s deadline; and, since other
processes notify only where a process said it waits, by giving the poll stacks no
`cover` there: every probe again unanswered until its deadline).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx
import psycopg2
import psycopg2.extensions
import pytest

from tests.acceptance.test_long_poll import SLOW_POLLING, Waiter
from tests.support.server import ServerProcess, all_started

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)

PARTITIONS = 4
PER_PARTITION = 750  # messages pushed to each partition
BATCH_SIZES = (1, 1, 1, 2, 3, 5)  # items per push request, drawn per request
CONSUMERS_PER_INSTANCE = 2
POP_TIMEOUT_MS = 2000  # consumers' long polls; they check for the end in between
WAKE_WITHIN_S = 1.0  # probes: push on one instance -> long poll answered on another
MIN_PROBES = 12
MAX_SLOW_PROBES = 3  # more and the p95 cannot be under WAKE_WITHIN_S: stop probing
LOAD_GUARD_S = 90.0  # everything pushed and consumed by then, or the test fails (~20 s)


@pytest.fixture
def instances(migrated_dsn: str) -> Iterator[list[ServerProcess]]:
    """Three servers (2, 1 and 1 worker processes) on the one database, started together."""
    servers = [
        ServerProcess(migrated_dsn, workers=workers, **SLOW_POLLING) for workers in (2, 1, 1)
    ]
    with all_started(servers):
        yield servers


@dataclass
class Delivery:
    """One pop answer with messages, as one consumer saw it."""

    consumer: str
    instance: int
    received_at: float  # monotonic, taken right after the answer was read
    ack_sent_at: float  # monotonic, taken just before its ack was sent
    partition: str
    seqs: list[int]
    transaction_ids: list[str]


@dataclass
class Books:
    pushed: dict[str, tuple[str, int]] = field(default_factory=dict)  # txid -> (partition, seq)
    deliveries: list[Delivery] = field(default_factory=list)
    received: dict[str, int] = field(default_factory=dict)  # txid -> times delivered
    acked: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    all_received: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)


def produce(urls: list[str], queue: str, p: int, books: Books) -> None:
    """Push partition `p`'s messages in sequence order, one request at a time (so commit
    order is sequence order), each request to the next instance."""
    rng = random.Random(p)
    partition = f"p{p}"
    clients = [httpx.Client(base_url=url, timeout=30) for url in urls]
    try:
        seq = 0
        request = 0
        while seq < PER_PARTITION and not books.stop.is_set():
            size = min(rng.choice(BATCH_SIZES), PER_PARTITION - seq)
            txids = {f"{partition}-{s}-{uuid.uuid4().hex[:8]}": s for s in range(seq, seq + size)}
            items = [{"queue": queue, "partition": partition, "transactionId": txid,
                      "payload": {"partition": partition, "seq": s}}
                     for txid, s in txids.items()]  # fmt: skip
            r = clients[(request + p) % len(clients)].post("/api/v1/push", json={"items": items})
            assert r.status_code == 201, r.text
            results = r.json()
            assert [x["status"] for x in results] == ["queued"] * size, results
            with books.lock:
                for txid, s in txids.items():
                    books.pushed[txid] = (partition, s)
            seq += size
            request += 1
    finally:
        for c in clients:
            c.close()


def consume(url: str, instance: int, name: str, queue: str, expected: int, books: Books) -> None:
    """Long-poll (queue mode, batch 10) and ack every batch with its lease, until told to
    stop; every answer goes into the books."""
    params = {"wait": "true", "timeout": str(POP_TIMEOUT_MS), "batch": "10"}
    with httpx.Client(base_url=url, timeout=POP_TIMEOUT_MS / 1000 + 10) as client:
        while not books.stop.is_set():
            r = client.get(f"/api/v1/pop/queue/{queue}", params=params)
            received_at = time.monotonic()
            if r.status_code == 204:
                continue
            assert r.status_code == 200, r.text
            messages = r.json()["messages"]
            assert messages, r.text
            partitions = {m["partition"] for m in messages}
            assert len(partitions) == 1, f"one pop, one partition: {partitions}"
            acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": "completed"} for m in messages]  # fmt: skip
            delivery = Delivery(
                consumer=name,
                instance=instance,
                received_at=received_at,
                ack_sent_at=time.monotonic(),
                partition=messages[0]["partition"],
                seqs=[m["data"]["seq"] for m in messages],
                transaction_ids=[m["transactionId"] for m in messages],
            )
            with books.lock:
                books.deliveries.append(delivery)
                for txid in delivery.transaction_ids:
                    books.received[txid] = books.received.get(txid, 0) + 1
            r = client.post("/api/v1/ack/batch", json={"acknowledgments": acks})
            assert r.status_code == 200, r.text
            results = r.json()
            assert all(x["success"] for x in results), results
            assert any(x.get("leaseReleased") for x in results), results
            with books.lock:
                books.acked.update(delivery.transaction_ids)
                if len(books.acked) >= expected:
                    books.all_received.set()


class Probe:
    """Measures one cross-instance wake-up: a long poll waits on `receiver`, a push to its
    queue goes to `sender`; the latency is from the push's start to the poll's answer."""

    def __init__(self, db: psycopg2.extensions.connection, prefix: str) -> None:
        self.db = db
        self.prefix = prefix
        self.count = 0
        self.clients: dict[str, httpx.Client] = {}  # keep-alive, one per sender

    def __call__(self, receiver: ServerProcess, sender: ServerProcess) -> float:
        queue = f"{self.prefix}-probe-{self.count}"
        self.count += 1
        client = self.clients.setdefault(sender.url, httpx.Client(base_url=sender.url))
        waiter = Waiter(receiver.url, queue, timeout_ms=8000, consumerGroup="probe")
        waiter.start()
        self.wait_first_pop(queue)
        pushed_at = time.monotonic()
        item = {"queue": queue, "partition": "Default", "payload": "probe"}
        r = client.post("/api/v1/push", json={"items": [item]}, timeout=10)
        assert r.status_code == 201 and r.json()[0]["status"] == "queued", r.text
        waiter.join(15)
        assert waiter.response is not None, "probe long poll not answered"
        if waiter.response.status_code == 204:
            return float("inf")
        assert waiter.response.status_code == 200, waiter.response.text
        assert waiter.response.json()["messages"][0]["data"] == "probe"
        return waiter.answered_at - pushed_at

    def wait_first_pop(self, queue: str, timeout: float = 10.0) -> None:
        """Until the long poll's first pop has run (and found nothing): a named consumer
        group's first pop records its subscription, in the pop's own transaction. From
        then on the poll worker leaves the group alone for seconds (`SLOW_POLLING`)."""
        deadline = time.monotonic() + timeout
        with self.db.cursor() as cur:
            while time.monotonic() < deadline:
                cur.execute(
                    "SELECT 1 FROM queen.consumer_groups_metadata"
                    " WHERE consumer_group = 'probe' AND queue_name = %s",
                    (queue,),
                )
                if cur.fetchone():
                    return
                time.sleep(0.005)
        raise AssertionError(f"the probe's long poll on {queue} never popped")


def first_difference(seqs: list[int]) -> str:
    """Where a partition's delivered sequence numbers leave 0, 1, 2, ..."""
    for i, seq in enumerate(seqs):
        if seq != i:
            return f"delivery {i} carried seq {seq} (around it: {seqs[max(0, i - 3) : i + 4]})"
    return f"{len(seqs)} deliveries for {PER_PARTITION} messages"


def p95(values: list[float]) -> float:
    ranked = sorted(values)
    return ranked[max(0, -(-len(ranked) * 95 // 100) - 1)]  # nearest rank


def test_three_instances_share_one_queue_exactly_once_in_order_and_wake_each_other(
    instances: list[ServerProcess], migrated_dsn: str
) -> None:
    queue = f"scale-{uuid.uuid4().hex[:10]}"
    expected = PARTITIONS * PER_PARTITION
    books = Books()
    urls = [srv.url for srv in instances]
    db = psycopg2.connect(migrated_dsn)
    db.autocommit = True
    probe = Probe(db, queue)
    latencies: list[tuple[float, bool]] = []  # (latency s, started while the load ran)
    started = time.monotonic()

    n_consumers = CONSUMERS_PER_INSTANCE * len(instances)
    with ThreadPoolExecutor(max_workers=n_consumers + PARTITIONS) as pool:
        futures: list[Future[None]] = []
        try:
            for i, url in enumerate(urls):
                for c in range(CONSUMERS_PER_INSTANCE):
                    futures.append(
                        pool.submit(consume, url, i, f"i{i}c{c}", queue, expected, books)
                    )
            futures += [pool.submit(produce, urls, queue, p, books) for p in range(PARTITIONS)]

            # Probes while the load runs, rotating over the instance pairs (receiver i,
            # sender i + 1): A <- B, B <- C, C <- A. At least MIN_PROBES in all.
            k = 0
            while True:
                loaded = not books.all_received.is_set()
                if not loaded and k >= MIN_PROBES:
                    break
                if sum(1 for lat, _ in latencies if lat >= WAKE_WITHIN_S) >= MAX_SLOW_PROBES:
                    break
                if any(f.done() and f.exception() for f in futures):
                    break
                assert time.monotonic() - started < LOAD_GUARD_S, "load did not finish"
                receiver, sender = instances[k % 3], instances[(k + 1) % 3]
                latencies.append((probe(receiver, sender), loaded))
                k += 1

            # Until every message is acked; a producer's or consumer's failure ends it.
            while not books.all_received.wait(0.1):
                for f in futures:
                    if f.done():
                        f.result()
                assert time.monotonic() - started < LOAD_GUARD_S, (
                    f"{len(books.acked)} of {expected} messages acked after {LOAD_GUARD_S} s"
                )
        finally:
            books.stop.set()
            db.close()
            for client in probe.clients.values():
                client.close()
        # Consumers end with their current long poll (at most POP_TIMEOUT_MS): anything
        # delivered a second time by then is in the books too.
        for f in futures:
            f.result(timeout=POP_TIMEOUT_MS / 1000 + 15)

    slow = [round(lat, 3) for lat, _ in latencies if lat >= WAKE_WITHIN_S]
    values = [lat for lat, _ in latencies]
    assert values and p95(values) < WAKE_WITHIN_S, (
        f"cross-instance wake-ups: {len(slow)} of {len(values)} probes answered "
        f"{WAKE_WITHIN_S} s or more after the push ({slow}); the instances poll the "
        f"database only every 5-10 s by themselves"
    )
    assert len(values) >= MIN_PROBES
    assert sum(1 for _, loaded in latencies if loaded) >= 3, "probes while the load ran"

    # Exactly once: every pushed message delivered and acked once, nothing else.
    assert len(books.pushed) == expected
    assert books.all_received.is_set(), (
        f"{expected - len(books.acked)} of {expected} messages never delivered"
    )
    duplicates = {t: n for t, n in books.received.items() if n > 1}
    assert not duplicates, f"delivered more than once: {list(duplicates.items())[:5]}"
    assert set(books.received) == set(books.pushed)
    assert books.acked == set(books.pushed)

    # Order. A partition is leased to one consumer at a time: its next batch can only be
    # popped after the previous batch's ack committed, which is after that ack was sent,
    # which is after the previous batch was received. So, per partition, the batches in
    # the order they were received (one monotonic clock for every consumer thread) must
    # not overlap, and their sequence numbers laid end to end must be 0, 1, 2, ... exactly
    # (push order: each partition's producer sent one request at a time).
    by_partition: dict[str, list[Delivery]] = {}
    for d in books.deliveries:
        by_partition.setdefault(d.partition, []).append(d)
    assert sorted(by_partition) == [f"p{p}" for p in range(PARTITIONS)]
    for partition, deliveries in by_partition.items():
        deliveries.sort(key=lambda d: d.received_at)
        for before, after in itertools.pairwise(deliveries):
            assert after.received_at > before.ack_sent_at, (
                f"{partition}: {after.consumer} got {after.seqs} before {before.consumer} "
                f"acked {before.seqs}: two leases on one partition"
            )
        seqs = [s for d in deliveries for s in d.seqs]
        assert seqs == list(range(PER_PARTITION)), f"{partition}: {first_difference(seqs)}"
        for d in deliveries:
            for txid, seq in zip(d.transaction_ids, d.seqs, strict=True):
                assert books.pushed[txid] == (partition, seq)

    # The consumers of every instance took part, and nothing is left or still leased.
    assert {d.instance for d in books.deliveries} == {0, 1, 2}
    for url in urls:
        r = httpx.get(f"{url}/api/v1/pop/queue/{queue}", params={"batch": "100"}, timeout=10)
        assert r.status_code == 204, r.text
    with psycopg2.connect(migrated_dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM queen.partition_consumers pc"
            " JOIN queen.partitions p ON p.id = pc.partition_id"
            " JOIN queen.queues q ON q.id = p.queue_id"
            " WHERE q.name = %s AND pc.lease_id IS NOT NULL",
            (queue,),
        )
        assert cur.fetchone() == (0,)
    conn.close()
    print(  # shown with -s: the figures of the run
        f"\n{expected} messages, {len(books.deliveries)} batches, "
        f"{time.monotonic() - started:.1f} s; probes: {len(values)}, "
        f"p50 {sorted(values)[len(values) // 2] * 1000:.1f} ms, p95 {p95(values) * 1000:.1f} ms"
    )
