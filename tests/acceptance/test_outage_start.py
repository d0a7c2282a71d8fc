"""A server that starts while PostgreSQL is down still comes up (issue 10, item 5).

`queen-threads serve` (what a container runs; gunicorn -k gevent, 2 workers) on a
PostgreSQL of the test's own. Pushes are stored, PostgreSQL stops, the server is SIGKILLed
while pushes are in flight, and `serve` starts again with the database still down (a
container restart): it answers /health 503, pops 503 with Retry-After (long polls too) and
buffers 100 more pushes. Once PostgreSQL is back the buffer is replayed: every
acknowledged message is stored exactly once, in push order per partition, and the server
serves normally. A database that accepts connections and never answers must not hang the
server either.
"""

from __future__ import annotations

import http.client
import itertools
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import psycopg2
import pytest

from queen_threads.embedded import EmbeddedPostgres
from tests.support.outage import ServeProcess, first_answer, kill_hard, wait_for

API = "/api/v1"
QUEUE = "outage"
PRODUCERS = 3
BATCH_SIZES = (1, 4, 2, 7, 3)
ACKED_BEFORE_KILL = 40  # per producer, then one more push is put in flight and the kill
POPS = (f"{API}/pop/queue/{QUEUE}", f"{API}/pop/queue/{QUEUE}?wait=true&timeout=20000")


def item(producer: int, n: int) -> dict[str, Any]:
    """Message `n` of a producer; each partition has one producer, so number order is
    push order within a partition."""
    return {
        "queue": QUEUE,
        "partition": f"w{producer}p{n % 2}",
        "payload": {"w": producer, "n": n},
        "transactionId": f"w{producer}-{n}",
    }


def push(url: str, items: list[dict[str, Any]]) -> list[str]:
    r = httpx.post(f"{url}{API}/push", json={"items": items}, timeout=30)
    assert r.status_code == 201, r.text
    out = r.json()
    assert [x["transactionId"] for x in out] == [i["transactionId"] for i in items]
    return [str(x["status"]) for x in out]


class Producer(threading.Thread):
    """Pushes its messages one request at a time (all must be answered `buffered`). After
    ACKED_BEFORE_KILL acknowledged messages it puts one more request on the wire, says so
    (`in_flight`), and reads its answer only once the server was killed: acknowledged if
    an answer had arrived, unknown otherwise."""

    def __init__(self, port: int, producer: int, first: int, killed: threading.Event) -> None:
        super().__init__(name=f"producer-{producer}", daemon=True)
        self.port, self.producer, self.next_n, self.killed = port, producer, first, killed
        self.in_flight = threading.Event()
        self.attempted: list[str] = []
        self.acked: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            sizes = itertools.cycle(BATCH_SIZES)
            while not self._push([item(self.producer, n) for n in self._take(next(sizes))]):
                pass
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.in_flight.set()

    def _take(self, count: int) -> range:
        first, self.next_n = self.next_n, self.next_n + count
        return range(first, self.next_n)

    def _push(self, batch: list[dict[str, Any]]) -> bool:
        """One push; True once the push in flight at the kill has been dealt with."""
        last = len(self.acked) >= ACKED_BEFORE_KILL
        self.attempted += [i["transactionId"] for i in batch]
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(
                "POST", f"{API}/push", orjson.dumps({"items": batch}),
                {"Content-Type": "application/json"},
            )  # fmt: skip
            if last:
                self.in_flight.set()
                assert self.killed.wait(60), "the server was not killed"
            try:
                resp = conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException):
                if last:
                    return True  # killed before it answered: the outcome is unknown
                raise
        finally:
            conn.close()
        assert resp.status == 201, body
        assert [r["status"] for r in orjson.loads(body)] == ["buffered"] * len(batch)
        self.acked += [i["transactionId"] for i in batch]
        return last


def stored(dsn: str) -> list[tuple[str, int, str, int]]:
    """(partition, n, transactionId, copies of that transactionId) in queue order."""
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(
            """SELECT p.name, (m.payload ->> 'n')::int, m.transaction_id,
                      count(*) OVER (PARTITION BY m.transaction_id)
                 FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id
                 JOIN queen.queues q ON q.id = p.queue_id
                WHERE q.name = %s ORDER BY m.created_at, m.id""",
            (QUEUE,),
        )
        rows = [(r[0], r[1], r[2], r[3]) for r in cur.fetchall()]
    conn.close()
    return rows


def replayed(url: str) -> bool:
    status = httpx.get(f"{url}{API}/status/buffers", timeout=10).json()
    return bool(status["pending"] == 0 and status["failed"] == 0 and not status["files"])


def assert_unavailable(r: httpx.Response) -> None:
    assert r.status_code == 503, r.text
    assert int(r.headers["retry-after"]) >= 1
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]


def test_serve_starts_during_an_outage_and_loses_nothing_acknowledged(
    private_pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    env = {"FILE_BUFFER_DIR": str(tmp_path / "buffers"), "FILE_BUFFER_FLUSH_MS": "50"}
    acked: list[str] = []
    attempted: set[str] = set()
    next_n = dict.fromkeys(range(PRODUCERS), 0)

    first = ServeProcess(private_pg.dsn, workers=2, **env).start()  # migrates the database
    killed = threading.Event()
    producers: list[Producer] = []
    try:
        for p in range(PRODUCERS):  # before the outage: straight to the database
            batch = [item(p, n) for n in range(10)]
            assert push(first.url, batch) == ["queued"] * 10
            acked += [i["transactionId"] for i in batch]
            attempted |= {i["transactionId"] for i in batch}
        private_pg.stop()
        producers = [Producer(first.port, p, 10, killed) for p in range(PRODUCERS)]
        for producer in producers:
            producer.start()
        for producer in producers:
            assert producer.in_flight.wait(60), "no push in flight"
        kill_hard(first)  # a push of every producer is on the wire
    finally:
        killed.set()
        for producer in producers:
            producer.join(60)
        if first.proc is not None and first.proc.poll() is None:
            kill_hard(first)
    for producer in producers:
        assert producer.error is None, repr(producer.error)
        acked += producer.acked
        attempted |= set(producer.attempted)
        next_n[producer.producer] = producer.next_n
    assert list((tmp_path / "buffers").glob("failover-*.buf*")), "the killed server's files"

    # A container restart: the same command, the database still down.
    second = ServeProcess(private_pg.dsn, workers=2, **env)
    second.spawn()
    try:
        health = first_answer(f"{second.url}/health")
        assert health.status_code == 503, health.text
        assert health.json()["database"] == "disconnected" and health.json()["error"]
        for path in POPS:
            assert_unavailable(httpx.get(f"{second.url}{path}", timeout=10))
        for k in range(100):
            p = k % PRODUCERS
            message = item(p, next_n[p])
            next_n[p] += 1
            assert push(second.url, [message]) == ["buffered"]
            acked.append(message["transactionId"])
            attempted.add(message["transactionId"])

        private_pg.restart()
        wait_for(lambda: replayed(second.url), timeout=60, what="the replay of the buffer")
        rows = stored(private_pg.dsn)
        ids = {tx for _, _, tx, _ in rows}
        assert all(copies == 1 for *_, copies in rows), "a message stored twice"
        assert set(acked) <= ids, f"acknowledged but lost: {sorted(set(acked) - ids)}"
        assert ids <= attempted
        for partition in {name for name, *_ in rows}:
            ns = [n for name, n, *_ in rows if name == partition]
            assert ns == sorted(ns), f"{partition} out of push order"

        # Serving normally: the schema is there, pops and pushes reach the database.
        assert first_answer(f"{second.url}/health").json()["schema"] == "ready"
        pop = httpx.get(
            f"{second.url}{API}/pop/queue/{QUEUE}/partition/w0p0",
            params={"wait": "true", "timeout": 5000, "batch": 10_000},
            timeout=30,
        )
        assert pop.status_code == 200, pop.text
        assert [m["data"]["n"] for m in pop.json()["messages"]] == [
            n for name, n, *_ in rows if name == "w0p0"
        ]
        assert push(second.url, [item(0, next_n[0])]) == ["queued"]
    finally:
        second.stop()


@pytest.fixture
def unanswering_port() -> Iterator[int]:
    """A TCP port whose kernel completes handshakes and that never answers a byte: a hung
    database (or a proxy in front of a dead one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)  # never accept()ed
        yield int(sock.getsockname()[1])


def test_a_database_that_never_answers_does_not_hang_the_server(
    unanswering_port: int, tmp_path: Path
) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{unanswering_port}/postgres?sslmode=disable"
    srv = ServeProcess(dsn, workers=2, FILE_BUFFER_DIR=str(tmp_path / "buffers"))
    srv.spawn()
    try:
        health = first_answer(f"{srv.url}/health")  # bounded by DB_CONNECTION_TIMEOUT
        assert health.status_code == 503, health.text
        assert "timeout expired" in health.json()["error"]
        assert push(srv.url, [item(0, 0)]) == ["buffered"]
        for path in POPS:
            assert_unavailable(httpx.get(f"{srv.url}{path}", timeout=10))
        assert httpx.get(f"{srv.url}{API}/status/buffers", timeout=10).json()["pending"] == 1
    finally:
        srv.stop()
