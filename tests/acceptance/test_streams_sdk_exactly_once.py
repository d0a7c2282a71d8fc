"""Exactly-once through the official client's streaming SDK under faults, on the real server.

A tumbling-window sum (1 s windows of event time) over 20,000 messages in 20 partitions of
one source queue, computed by an SDK worker in a process of its own
(tests/support/sdk_worker.py). Mid-run the worker is SIGKILLed twice and started again, and
once every worker process of the server is SIGKILLed (gunicorn starts new ones; the SDK
worker goes on): a cycle may be cut off before its commit (rolled back, redelivered when its
lease ends), or after it (the client retries it, and the server refuses the retry: its lease
is gone). The same pipeline also runs once with the 2.6.0 client. In the end
every window's sum in the sink equals the sum computed from the source, and each window was
emitted exactly once.

Each partition's 1,000 messages are 10 ms apart in event time: 10 windows of 100 (99 for the
last); the 1,000th is 20 s later, so it closes them all and stays open itself (as state).
The source's lease time is 4 s: what a killed process held comes back after at most that.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client26.run import LIB, ensure_installed
from tests.support.server import ROOT, ServerProcess
from tests.support.streams_sdk import sql

PARTITIONS = 20
PER_PARTITION = 1_000
TOTAL = PARTITIONS * PER_PARTITION
WINDOW_MS = 1_000
STEP_MS = 10
BASE = 1_700_000_000_000
CLOSER_MS = 20_000  # event time of each partition's last message, after its first
LEASE_S = 4
DEADLINE_S = 120  # the whole run; it takes about 25 s


def value(p: int, i: int) -> int:
    return (i * 7 + p * 13) % 101


def event_ms(i: int) -> int:
    return BASE + (CLOSER_MS if i == PER_PARTITION - 1 else i * STEP_MS)


def expected_windows(partitions: int) -> dict[tuple[str, int], tuple[int, int]]:
    """(partition, window start) -> (sum, count) of every window the closers close."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for p in range(partitions):
        for i in range(PER_PARTITION - 1):
            start = event_ms(i) // WINDOW_MS * WINDOW_MS
            s, c = out.get((f"p{p}", start), (0, 0))
            out[(f"p{p}", start)] = (s + value(p, i), c + 1)
    return out


QUEUE_PAYLOADS = """
    SELECT m.payload FROM queen.messages m
      JOIN queen.partitions p ON p.id = m.partition_id
      JOIN queen.queues q ON q.id = p.queue_id
     WHERE q.name = %s"""
OPEN_WINDOWS = """
    SELECT s.value FROM queen.sdk_state s JOIN queen.sdk_queries q ON q.id = s.query_id
     WHERE q.name = %s AND s.key <> '__wm__'"""


def partition_names(dsn: str, queue: str) -> dict[str, str]:
    rows = sql(
        dsn,
        "SELECT p.id::text, p.name FROM queen.partitions p JOIN queen.queues q"
        " ON q.id = p.queue_id WHERE q.name = %s",
        queue,
    )
    return {str(pid): str(name) for pid, name in rows}


@pytest.fixture
def eo_server(migrated_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(migrated_dsn, workers=2) as srv:
        yield srv


class Worker:
    """The SDK worker subprocess: started, killed, started again."""

    def __init__(self, url: str, source: str, sink: str, query: str, log: Path, **env: str) -> None:
        self.args = [
            sys.executable,
            "-m",
            "tests.support.sdk_worker",
            url,
            source,
            sink,
            query,
            "400",
            "4",
        ]
        self.log = log
        self.env = {**os.environ, **env}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.args, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


def children(pid: int) -> list[int]:
    """The process ids whose parent is `pid` (gunicorn's workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def progress(dsn: str, query: str) -> tuple[int, int]:
    """(source messages acknowledged by the query's cycles, sink messages pushed)."""
    row = sql(
        dsn,
        "SELECT coalesce(sum(s.acked), 0), coalesce(sum(s.pushed), 0) FROM queen.sdk_shards s"
        " JOIN queen.sdk_queries q ON q.id = s.query_id WHERE q.name = %s",
        query,
    )
    return int(row[0][0]), int(row[0][1])


def shards(dsn: str, query: str) -> int:
    """Partitions with a committed cycle. The server's workers are killed only once every
    partition has one: the SDK keeps a partition's event-time watermark in memory until
    its first commit stores it, and a first cycle refused after a restart (its lease ran
    out meanwhile) would leave the runner with a watermark the state does not have, so it
    would drop the redelivered batch as late (the runner's behaviour, not the server's)."""
    row = sql(
        dsn,
        "SELECT count(*) FROM queen.sdk_shards s JOIN queen.sdk_queries q"
        " ON q.id = s.query_id WHERE q.name = %s",
        query,
    )
    return int(row[0][0])


def wait_for(what: str, ready: Callable[[], bool], deadline: float) -> None:
    """Check `ready()` every 50 ms (the worker is another process) until the deadline."""
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def fill_source(url: str, source: str, partitions: int) -> None:
    res = httpx.post(
        f"{url}/api/v1/configure", json={"queue": source, "options": {"leaseTime": LEASE_S}}
    )
    assert res.status_code == 200, res.text
    for p in range(partitions):
        payloads = [{"v": value(p, i), "ts": event_ms(i)} for i in range(PER_PARTITION)]
        items = [{"queue": source, "partition": f"p{p}", "payload": d} for d in payloads]
        res = httpx.post(f"{url}/api/v1/push", json={"items": items}, timeout=30)
        assert res.status_code == 201, res.text


def kill_server_workers(server: ServerProcess) -> None:
    """SIGKILL every gunicorn worker: in-flight requests are cut off, the master starts new
    workers on the same listening socket."""
    assert server.proc is not None
    workers = children(server.proc.pid)
    assert workers
    for pid in workers:
        os.kill(pid, signal.SIGKILL)


def check_exactly_once(dsn: str, source: str, sink: str, query: str, partitions: int) -> None:
    """Each closed window in the sink once, with the source's sum and count; each
    partition's closer the one open window left, alone in it."""
    names = partition_names(dsn, source)
    outputs = [r[0] for r in sql(dsn, QUEUE_PAYLOADS, sink)]
    emitted = Counter((names[o["key"]], o["windowStart"]) for o in outputs)
    assert [w for w, n in emitted.items() if n > 1] == [], "windows emitted more than once"
    got = {(names[o["key"]], o["windowStart"]): (o["sum"], o["count"]) for o in outputs}
    assert got == expected_windows(partitions)
    open_rows: list[Any] = sql(dsn, OPEN_WINDOWS, query)
    assert len(open_rows) == partitions
    assert all(r[0]["acc"]["count"] == 1 for r in open_rows)
    closers = sum(value(p, PER_PARTITION - 1) for p in range(partitions))
    assert sum(r[0]["acc"]["sum"] for r in open_rows) == closers


@pytest.mark.slow
def test_tumbling_sum_is_exactly_once_through_sdk_and_server_kills(
    eo_server: ServerProcess, migrated_dsn: str, tmp_path: Path
) -> None:
    source, sink, query = "eo-src", "eo-sink", "eo.sum"
    fill_source(eo_server.url, source, PARTITIONS)
    deadline = time.monotonic() + DEADLINE_S
    worker = Worker(eo_server.url, source, sink, query, tmp_path / "worker.log")
    seen_at_faults: list[int] = []
    try:
        worker.start()
        # Two SIGKILLs of the SDK worker, then one of every server worker, mid-run (the SDK
        # worker goes on through that one: its client retries what was cut off).
        for fault, share in (("sdk", 0.2), ("sdk", 0.45), ("server", 0.7)):
            wait_for(
                f"{share:.0%} consumed",
                lambda s=share, f=fault: (
                    progress(migrated_dsn, query)[0] >= s * TOTAL
                    and (f == "sdk" or shards(migrated_dsn, query) == PARTITIONS)
                ),
                deadline,
            )
            seen_at_faults.append(progress(migrated_dsn, query)[0])
            if fault == "sdk":
                worker.kill()
                worker.start()
            else:
                kill_server_workers(eo_server)
        wait_for(
            "every message consumed", lambda: progress(migrated_dsn, query)[0] >= TOTAL, deadline
        )
    finally:
        worker.kill()
    assert all(0 < n < TOTAL for n in seen_at_faults), seen_at_faults
    check_exactly_once(migrated_dsn, source, sink, query, PARTITIONS)


def test_the_2_6_0_clients_sdk_computes_the_same_windows(
    eo_server: ServerProcess, migrated_dsn: str, tmp_path: Path
) -> None:
    """The same worker with queen-mq 2.6.0 (its runtime sends the same bodies), 4
    partitions, no faults."""
    ensure_installed()
    source, sink, query, partitions = "eo26-src", "eo26-sink", "eo26.sum", 4
    fill_source(eo_server.url, source, partitions)
    total = partitions * PER_PARTITION
    worker = Worker(
        eo_server.url, source, sink, query, tmp_path / "worker26.log", PYTHONPATH=str(LIB)
    )
    try:
        worker.start()
        wait_for(
            "every message consumed",
            lambda: progress(migrated_dsn, query)[0] >= total,
            time.monotonic() + DEADLINE_S,
        )
    finally:
        worker.kill()
    assert "queen-mq 2.6.0" in worker.log.read_text()
    check_exactly_once(migrated_dsn, source, sink, query, partitions)
