"""Start the real `gunicorn -k gevent` server in a subprocess for acceptance tests."""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from queen_threads.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]


class ServerProcess:
    """One queen-threads server (gunicorn master + workers) on a free loopback port."""

    def __init__(self, dsn: str, workers: int = 2, **env: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(os.environ)
        for key in ("PG_HOST", "PGHOST"):
            self.env.pop(key, None)
        self.env.update(
            DATABASE_URL=dsn,
            HOST="127.0.0.1",
            PORT=str(self.port),
            NUM_WORKERS=str(workers),
            LOG_LEVEL="warn",
            GRACEFUL_TIMEOUT="10",
        )
        self.env.update({k: str(v) for k, v in env.items()})
        cert = self.env.get("SSL_CERTFILE")
        if cert:  # served over TLS: clients trust the test's own certificate
            self.url = f"https://127.0.0.1:{self.port}"
        self.verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=cert) if cert else True
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"queen-server-{self.port}.log"

    def start(self, timeout: float = 30) -> ServerProcess:
        self.spawn()
        self.wait_healthy(timeout)
        return self

    def spawn(self) -> None:
        """Start the process without waiting for it to be healthy."""
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "config" / "gunicorn.conf.py"),
             "queen_threads.wsgi:app"],
            env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def wait_healthy(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.logs()}")
            try:
                r = httpx.get(f"{self.url}/health", timeout=2, verify=self.verify)
                if r.status_code == 200 and r.json().get("schema") == "ready":
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not healthy in {timeout}s:\n{self.logs()}")

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 20) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def all_started(servers: list[ServerProcess]) -> Iterator[list[ServerProcess]]:
    """Several servers started side by side (each spawned, then each waited for), stopped at
    the end of the block."""
    with contextlib.ExitStack() as stack:
        for srv in servers:
            srv.spawn()
            stack.callback(srv.stop)
        for srv in servers:
            srv.wait_healthy()
        yield servers


@contextlib.contextmanager
def side_by_side(dsn: str, count: int = 2, **env: Any) -> Iterator[list[ServerProcess]]:
    """`count` servers (two worker processes each) on one database, started together and
    stopped at the end."""
    with all_started([ServerProcess(dsn, workers=2, **env) for _ in range(count)]) as servers:
        yield servers
