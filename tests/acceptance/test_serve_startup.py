"""How the server starts, since it holds less memory at rest (issue 31, part 4;
docs/operations.md, "Memory at rest"):

- `queen-threads serve` with a configured database leaves no launcher behind: the process
  it started becomes the gunicorn master;
- with the embedded PostgreSQL the launcher stays (it stops the database at the end), but
  never loads the database driver; SIGTERM stops the server and the database;
- the gunicorn master imports the application's modules after gevent patched them
  (config/gunicorn.conf.py), and one worker still serves concurrently: two long polls and
  the pushes that answer them, and a request while another waits on a database lock.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg2

from tests.acceptance.test_long_poll import wait_registered
from tests.support.outage import ServeProcess
from tests.support.server import ServerProcess


def qname() -> str:
    return f"start-{uuid.uuid4().hex[:10]}"


def push(url: str, queue: str, payload: Any, timeout: float = 10) -> httpx.Response:
    items = [{"queue": queue, "partition": "Default", "payload": payload}]
    return httpx.post(f"{url}/api/v1/push", json={"items": items}, timeout=timeout)


def is_gunicorn(proc: psutil.Process) -> bool:
    return any(arg == "gunicorn" or arg.endswith("/gunicorn") for arg in proc.cmdline()[:3])


def maps_driver(pid: int) -> bool:
    """Whether the process has psycopg2's extension (and libpq) loaded."""
    return "_psycopg" in Path(f"/proc/{pid}/maps").read_text()


def _children(proc: psutil.Process, n: int, timeout: float) -> list[psutil.Process]:
    """proc's children once there are n of them (a fork has no event to wait on: polled
    until the deadline), else those there are then."""
    deadline = time.monotonic() + timeout
    children = proc.children()
    while len(children) < n and time.monotonic() < deadline:
        time.sleep(0.05)
        children = proc.children()
    return children


def test_serve_with_a_database_becomes_the_gunicorn_master(migrated_dsn: str) -> None:
    srv = ServeProcess(migrated_dsn, workers=2).start()
    try:
        assert srv.proc is not None
        master = psutil.Process(srv.proc.pid)
        assert is_gunicorn(master), f"no launcher stays resident: {master.cmdline()}"
        # /health answers as soon as one worker serves; the other may still be forking
        workers = _children(master, 2, timeout=15.0)
        assert len(workers) == 2 and all(is_gunicorn(w) for w in workers)
        r = push(srv.url, qname(), {"n": 1})
        assert r.status_code == 201, r.text
    finally:
        assert srv.stop() == 0
    assert "Traceback" not in srv.logs()


def test_serve_with_the_embedded_database_keeps_a_launcher_without_the_driver(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    srv = ServeProcess("", workers=1, QUEEN_DATA_DIR=str(data))
    srv.env.pop("DATABASE_URL")
    srv.start(timeout=120)  # initdb on first use
    try:
        assert srv.proc is not None
        launcher = psutil.Process(srv.proc.pid)
        (master,) = launcher.children()
        assert is_gunicorn(master) and not is_gunicorn(launcher)
        assert len(master.children()) == 1
        assert not maps_driver(launcher.pid), "the launcher only supervises"
        assert maps_driver(master.children()[0].pid)
        q = qname()
        assert push(srv.url, q, {"n": 1}).status_code == 201
        r = httpx.get(f"{srv.url}/api/v1/pop/queue/{q}", timeout=10)
        assert r.json()["messages"][0]["data"] == {"n": 1}
        assert (data / "pgdata" / "postmaster.pid").exists()
    finally:
        assert srv.stop(timeout=60) == 0
    assert not (data / "pgdata" / "postmaster.pid").exists(), "the database stopped too"


def test_one_worker_serves_while_long_polls_and_a_database_call_wait(
    migrated_dsn: str,
) -> None:
    """NUM_WORKERS=1: anything that blocked the process (an unpatched socket, a psycopg2
    call that does not yield) would hold every other request."""
    with ServerProcess(migrated_dsn, workers=1) as srv:
        queues = [qname(), qname()]
        answers: dict[str, httpx.Response] = {}

        def long_poll(queue: str) -> None:
            answers[queue] = httpx.get(
                f"{srv.url}/api/v1/pop/queue/{queue}",
                params={"wait": "true", "timeout": "15000"},
                timeout=20,
            )

        polls = [threading.Thread(target=long_poll, args=(q,), daemon=True) for q in queues]
        for poll in polls:
            poll.start()
        wait_registered(srv.url, 2)  # both waiting in the one worker
        for i, queue in enumerate(queues):
            assert push(srv.url, queue, {"i": i}).status_code == 201
        for poll in polls:
            poll.join(10)
        assert [answers[q].json()["messages"][0]["data"] for q in queues] == [{"i": 0}, {"i": 1}]

        blocker = psycopg2.connect(migrated_dsn)
        try:
            with blocker.cursor() as cur:
                cur.execute("LOCK TABLE queen.messages IN ACCESS EXCLUSIVE MODE")
            pushed: list[httpx.Response] = []
            pusher = threading.Thread(
                target=lambda: pushed.append(push(srv.url, qname(), {"late": True}, 30)),
                daemon=True,
            )
            pusher.start()
            time.sleep(0.5)  # the push waits on the lock, inside the worker
            started = time.monotonic()
            health = httpx.get(f"{srv.url}/health", timeout=10)
            assert health.status_code == 200
            assert time.monotonic() - started < 3, "the worker was blocked by the push"
            assert pusher.is_alive() and not pushed, "the push was still waiting"
        finally:
            blocker.rollback()
            blocker.close()
        pusher.join(30)
        assert pushed and pushed[0].status_code == 201, pushed
