"""Helpers of the tests that take PostgreSQL or the server down: a server that may start
while the database is down, a SIGKILL of the whole process tree, bounded polling."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import psutil

from tests.support.server import ROOT, ServerProcess

T = TypeVar("T")


class OutageServer(ServerProcess):
    """A gunicorn server that may start while PostgreSQL is down: ready once it answers."""

    def wait_healthy(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.logs()}")
            try:
                if httpx.get(f"{self.url}/api/v1/status/buffers", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not answering in {timeout}s:\n{self.logs()}")


class ServeProcess(ServerProcess):
    """`queen-threads serve` (what a container runs) against the configured DATABASE_URL."""

    def spawn(self) -> None:
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "queen_threads.cli", "serve"],
            env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def kill_hard(srv: ServerProcess) -> None:
    """SIGKILL the server's processes (master, workers, and a `serve` parent) at once."""
    assert srv.proc is not None
    top = psutil.Process(srv.proc.pid)
    procs = [top, *top.children(recursive=True)]
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
    srv.proc.wait(10)
    _, alive = psutil.wait_procs(procs, timeout=10)
    for proc in alive:  # orphaned workers may stay zombies until something reaps them
        with contextlib.suppress(psutil.NoSuchProcess):
            assert proc.status() == psutil.STATUS_ZOMBIE, proc


def wait_for(check: Callable[[], Any], timeout: float = 20, what: str = "condition") -> Any:
    """Poll `check` until it returns something truthy (returned), up to `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def first_answer(url: str, timeout: float = 30) -> httpx.Response:
    """The first HTTP answer of `url`, whatever its status (a server still starting does
    not answer at all)."""

    def attempt() -> list[httpx.Response]:
        with contextlib.suppress(httpx.TransportError):
            return [httpx.get(url, timeout=5)]
        return []

    answers: list[httpx.Response] = wait_for(attempt, timeout, f"an answer from {url}")
    return answers[0]
