"""Adding a worker to a running cluster and rebalancing the shards while messages are being
written (docs/scaling.md, "Adding a worker"): `citus_add_node` then `citus_rebalance_start`
move shard groups to the new node by logical replication, which needs `wal_level = logical`
on every node and a replica identity (here: the primary key) on every table of a moved
shard group. Under the real server, producers and consumers go on during the moves: no
answer is a 500, every accepted push is delivered once, and a partition's rows move
together (one co-location group)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg2
import psycopg2.errors
import psycopg2.extensions
import pytest

from queen_threads import migrate
from queen_threads.embedded import free_port
from tests.support.citus import CitusCluster
from tests.support.server import ServerProcess

DATABASE = "queen_rebalance"
PARTITIONS = 16
SPARE = "worker3"  # the node the tests add
CUT_EVERY_S = 1.5


class GrowingCluster(CitusCluster):
    """The tier's cluster with `wal_level = logical` (shard moves replicate logically), and
    workers added later while it runs."""

    def __init__(self, folder: str | Path) -> None:
        super().__init__(folder)
        self.added: list[str] = []
        self._initdbs: dict[str, subprocess.Popen[str]] = {}

    def start(self) -> str:
        # the node added later is initialised beside the others (initdb is most of its start)
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.user:
            shutil.chown(self.folder, self.user, self.user)
        self._initdbs[SPARE] = self._initdb(self._data(SPARE))
        return super().start()

    def _write_settings(self, data: Path, port: int) -> None:
        super()._write_settings(data, port)
        with (data / "postgresql.auto.conf").open("a") as f:
            # 2 shards per worker: each move of a shard group is a logical replication of
            # its own (about 6 s here); a third worker still takes some of them
            f.write("wal_level = logical\ncitus.shard_count = 4\n"
                    # a distributed transaction whose link to a worker is cut (LinkCutter)
                    # after PREPARE holds its locks there until recovered: soon, here
                    "citus.recover_2pc_interval = 1000\n")  # fmt: skip

    def start_worker(self, node: str, database: str) -> int:
        """A new PostgreSQL with the extension in `database` (not registered yet); its port."""
        data = self._data(node)
        initdb = self._initdbs.pop(node, None) or self._initdb(data)
        _, err = initdb.communicate(timeout=300)
        assert (data / "PG_VERSION").exists(), err
        self.ports[node] = free_port()
        self._write_settings(data, self.ports[node])
        proc = self._spawn("pg_ctl", *self._start_args(node))
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        self.added.append(node)
        for db, sql in (("postgres", f'CREATE DATABASE "{database}"'),
                        (database, "CREATE EXTENSION citus")):  # fmt: skip
            conn = _autocommit(self.dsn(node, db))
            try:
                with conn.cursor() as cur:
                    cur.execute(sql)
            finally:
                conn.close()
        return self.ports[node]

    def stop(self, mode: str = "immediate") -> None:
        added = [
            self._spawn("pg_ctl", "-D", str(self._data(node)), "-m", mode, "-w", "stop")
            for node in self.added
            if (self._data(node) / "postmaster.pid").exists()
        ]  # beside the others'
        super().stop(mode)
        for proc in added:
            proc.communicate(timeout=60)


def _autocommit(dsn: str) -> psycopg2.extensions.connection:
    conn = psycopg2.connect(dsn, connect_timeout=10)
    conn.autocommit = True
    return conn


@pytest.fixture
def cluster() -> Iterator[GrowingCluster]:
    folder = tempfile.mkdtemp(prefix="queen-test-citus-grow-")
    Path(folder).chmod(0o755)
    grown = GrowingCluster(folder)
    try:
        grown.start()
        yield grown
    finally:
        grown.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)


def _workers_of(cur: psycopg2.extensions.cursor, table: str) -> dict[int, int]:
    cur.execute(
        "SELECT nodeport, count(*) FROM citus_shards WHERE table_name = %s::regclass GROUP BY 1",
        (table,),
    )
    return {int(port): int(n) for port, n in cur.fetchall()}


LEASE_S = 15  # the HTTP test's queue: a pop answered 503 after its lease committed (the
# answer lost with a worker's connection) gives its partition back after this; longer than
# the pool's lock_timeout (10 s), so an ack held by a move's write block still holds it


class Producer(threading.Thread):
    """Single-message pushes through the server, partition by partition; keeps the
    transaction ids the server accepted (stored, or buffered for a replay). A push answered
    503 is sent again with the same transactionId, as a client does (then `duplicate` means
    the first attempt was stored); a 500 is a failure of the test."""

    def __init__(self, url: str, queue: str) -> None:
        super().__init__(daemon=True)
        self.url, self.queue = url, queue
        self.accepted: list[str] = []
        self.buffered = 0
        self.refused: list[str] = []
        self.unavailable = 0  # 503 answers, each sent again
        self.stop = threading.Event()
        self.every_partition = threading.Event()  # each partition took two messages

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            n, retry = 0, False
            while not self.stop.is_set():
                tx = str(uuid.UUID(int=n + 1, version=4))
                item = {"queue": self.queue, "partition": f"p{n % PARTITIONS}",
                        "payload": {"n": n}, "transactionId": tx}  # fmt: skip
                r = client.post("/api/v1/push", json={"items": [item]})
                status = r.json()[0].get("status") if r.status_code == 201 else None
                if status in ("queued", "buffered") or (retry and status == "duplicate"):
                    self.accepted.append(tx)
                    self.buffered += status == "buffered"
                    if len(self.accepted) >= 2 * PARTITIONS:
                        self.every_partition.set()
                elif r.status_code == 503:
                    self.unavailable += 1
                    retry = True
                    continue  # the same item again (its transactionId dedups)
                else:
                    self.refused.append(f"{r.status_code}: {r.text[:300]}")
                n, retry = n + 1, False


class Consumer(threading.Thread):
    """Pops (batch 50, long polls of 1 s) and acks each batch through the server until
    stopped and, once stopped, every id of `wanted` arrived (or the deadline). A pop or an
    ack answered 503 (a worker's connection lost, or the write block, while a shard moves)
    is sent again, as a client does; anything else but 200/204 is a failure."""

    def __init__(self, url: str, queue: str) -> None:
        super().__init__(daemon=True)
        self.url, self.queue = url, queue
        self.got: list[str] = []
        self.wanted: set[str] = set()
        self.stop = threading.Event()
        self.deadline = float("inf")
        self.error: BaseException | None = None
        self.unavailable = 0  # pops and acks answered 503

    def done(self) -> bool:
        return self.stop.is_set() and (
            self.wanted <= set(self.got) or time.monotonic() > self.deadline
        )

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.url, timeout=30) as client:
                while not self.done():
                    self._round(client)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _round(self, client: httpx.Client) -> None:
        params: dict[str, str | int] = {"batch": 50, "wait": "true", "timeout": 1000}
        r = client.get(f"/api/v1/pop/queue/{self.queue}", params=params)
        if r.status_code != 200:
            assert r.status_code in (204, 503), r.text
            self.unavailable += r.status_code == 503
            return
        messages = [m for m in r.json().get("messages") or [] if m]
        acks = [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
             "leaseId": m.get("leaseId"), "status": "completed"}
            for m in messages
        ]  # fmt: skip
        # an ack is idempotent (a completed one sent again answers success, `already_acked`)
        deadline = time.monotonic() + LEASE_S
        while True:
            a = client.post("/api/v1/ack/batch", json={"acknowledgments": acks})
            if a.status_code != 503 or time.monotonic() > deadline:
                break
            self.unavailable += 1
        assert a.status_code == 200 and all(x.get("success") for x in a.json()), a.text
        self.got += [m["transactionId"] for m in messages]


class LinkCutter(threading.Thread):
    """While the shards move, every CUT_EVERY_S ends the workers' backends that serve the
    server's coordinator sessions (`pg_terminate_backend`, as a worker restart or a network
    cut would): the statements in flight fail on the coordinator with Citus's relayed
    errors, so the server's answers to them are exercised under the moves. The rebalancer's
    own connections (other global pids) are left alone."""

    def __init__(self, cluster: GrowingCluster, dsn: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.dsn = cluster, dsn
        self.cut = 0
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        coordinator = _autocommit(self.dsn)
        try:
            while not self.stop.wait(CUT_EVERY_S):
                with coordinator.cursor() as cur:
                    cur.execute(
                        "SELECT DISTINCT global_pid FROM citus_stat_activity"
                        " WHERE application_name LIKE 'queen-threads:%%'"
                    )
                    names = [f"citus_internal gpid={g}" for (g,) in cur.fetchall()]
                for node in ("worker1", "worker2", *self.cluster.added):
                    self.cut += self._cut(node, names)
        except psycopg2.Error as exc:
            self.errors.append(str(exc))
        finally:
            coordinator.close()

    def _cut(self, node: str, names: list[str]) -> int:
        conn = _autocommit(self.cluster.dsn(node, DATABASE))
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))"
                    " FROM pg_stat_activity WHERE application_name = ANY (%s)",
                    (names,),
                )
                row = cur.fetchone()
                return int(row[0]) if row else 0
        finally:
            conn.close()


def test_the_server_serves_while_a_third_worker_takes_shards(
    cluster: GrowingCluster, tmp_path: Path
) -> None:
    """The same growth under the real server: pushes and pops + acks over HTTP go on while
    the shards move, and the server's links to the workers are cut meanwhile (LinkCutter).
    No answer is a 500 (a worker's connection lost during a move is "database unavailable":
    a push goes to the failover buffer, a pop or an ack answers 503); every accepted push is
    delivered, and none twice after its ack."""
    dsn = cluster.create_database(DATABASE)
    migrate.migrate(dsn)
    queue = "grow-http"
    with ServerProcess(dsn, workers=1, FILE_BUFFER_DIR=str(tmp_path / "buffers"),
                       FILE_BUFFER_FLUSH_MS="100") as srv:  # fmt: skip
        r = httpx.post(f"{srv.url}/api/v1/configure", timeout=30,
                       json={"queue": queue, "options": {"leaseTime": LEASE_S}})  # fmt: skip
        assert r.status_code == 200, r.text
        producer, consumer = Producer(srv.url, queue), Consumer(srv.url, queue)
        producer.start()
        try:
            # the queue's partitions exist before the node is added and before the pops
            # start (a push that creates a partition writes the reference tables, and on
            # Citus a pop of the queue meanwhile was seen waiting out its statement
            # timeout: docs/scaling.md)
            assert producer.every_partition.wait(60)
            consumer.start()
            port = cluster.start_worker(SPARE, DATABASE)
            conn = _autocommit(dsn)
            cur = conn.cursor()
            cur.execute("SELECT citus_add_node('127.0.0.1', %s)", (port,))
            accepted_before = len(producer.accepted)
            received_before = len(consumer.got)
            cutter = LinkCutter(cluster, dsn)
            cur.execute("SELECT citus_rebalance_start()")
            cutter.start()
            try:
                cur.execute("SELECT citus_rebalance_wait()")
            finally:
                cutter.stop.set()
                cutter.join(timeout=30)
            cur.execute("SELECT state FROM citus_rebalance_status() ORDER BY job_id DESC LIMIT 1")
            assert cur.fetchone() == ("finished",)
            moved = _workers_of(cur, "queen.messages")
            # each shard group moved as one: every co-located table's shard sits with
            # messages'
            cur.execute(
                "SELECT count(DISTINCT nodeport) FROM citus_shards s "
                "JOIN pg_dist_shard d USING (shardid) "
                "WHERE s.colocation_id = (SELECT colocationid FROM pg_dist_partition "
                "                         WHERE logicalrelid = 'queen.messages'::regclass) "
                "GROUP BY d.shardminvalue"
            )
            together = {r[0] for r in cur.fetchall()}
            conn.close()
        finally:
            producer.stop.set()
            producer.join(timeout=60)
            # buffered pushes are replayed by the server, a lease a lost pop answer took
            # ends after LEASE_S: the consumer waits for every accepted push
            consumer.wanted = set(producer.accepted)
            consumer.deadline = time.monotonic() + 4 * LEASE_S
            consumer.stop.set()
            consumer.join(timeout=5 * LEASE_S)
    assert port in moved and moved[port] > 0, moved  # the third worker took shard groups
    assert together == {1}
    assert cutter.errors == [] and cutter.cut > 0  # the server's links to workers were cut
    assert consumer.error is None, consumer.error
    assert producer.refused == []  # no 500, nothing refused
    assert len(producer.accepted) > accepted_before  # pushes went on during the moves
    assert len(consumer.got) > received_before  # and pops + acks
    missing = set(producer.accepted) - set(consumer.got)
    assert not missing, (len(missing), sorted(missing)[:10], producer.buffered)
    assert set(consumer.got) == set(producer.accepted)
    assert len(consumer.got) == len(set(consumer.got))  # nothing twice
