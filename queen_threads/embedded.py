"""Zero-configuration PostgreSQL: the server binaries shipped in the `pgserver` wheel.

`EmbeddedPostgres(data_dir).start()` initialises a cluster in `data_dir/pgdata` on first
use, starts it on 127.0.0.1 (no Unix socket) and returns its DSN. Data survives restarts.
When run as root, PostgreSQL (which refuses to run as root) runs as the user `pgserver`.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import warnings
from pathlib import Path

from queen_threads.errors import ConfigError

log = logging.getLogger("queen_threads.embedded")

SYSTEM_USER = "pgserver"


class EmbeddedStartError(ConfigError):
    """The cluster exists but its server did not start (port taken, disk full, ...)."""


def _bin(name: str) -> str:
    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
        warnings.simplefilter("ignore")
        from pgserver._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedPostgres:
    """A private PostgreSQL cluster in a local folder."""

    def __init__(self, data_dir: str | Path, port: int = 0) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.pgdata = self.data_dir / "pgdata"
        self.logfile = self.data_dir / "postgres.log"
        self.requested_port = port
        self.port = 0
        self.started_here = False
        self.user = SYSTEM_USER if os.geteuid() == 0 else None

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?sslmode=disable"

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args),
            user=self.user,
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
        )

    def _prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.user is None:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pgserver.utils import ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists(self.user)
        ensure_prefix_permissions(self.data_dir)
        shutil.chown(self.data_dir, self.user, self.user)
        for path in self.data_dir.rglob("*"):
            if path.owner() != self.user:
                shutil.chown(path, self.user, self.user)

    def _initdb(self) -> None:
        if (self.pgdata / "PG_VERSION").exists():
            return
        res = self._run(
            _bin("initdb"), "-D", str(self.pgdata), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C", timeout=300,
        )  # fmt: skip
        if res.returncode != 0:
            raise ConfigError(f"initdb failed: {res.stderr.strip() or res.stdout.strip()}")

    def running_port(self) -> int | None:
        """The port of a postmaster already serving this data folder, if any."""
        pidfile = self.pgdata / "postmaster.pid"
        if not pidfile.exists():
            return None
        res = self._run(_bin("pg_ctl"), "-D", str(self.pgdata), "status")
        if res.returncode != 0:
            return None
        lines = pidfile.read_text().splitlines()
        return int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else None

    def start(self, wait_s: int = 60) -> str:
        """Start the server (or find it running) and return its DSN. Waits up to `wait_s`
        for it to accept connections; a server still starting then (e.g. replaying its
        WAL after a kill) is left to finish and its DSN returned (connections fail with
        "the database system is starting up" until it is ready)."""
        self._prepare()
        self._initdb()
        existing = self.running_port()
        if existing:
            self.port = existing
            log.info("embedded PostgreSQL already running on port %d", self.port)
            return self.dsn
        self.port = self.requested_port or free_port()
        opts = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
            "-c max_connections=400 -c shared_buffers=256MB"
        )
        res = self._run(
            _bin("pg_ctl"), "-D", str(self.pgdata), "-l", str(self.logfile), "-o", opts,
            "-w", "-t", str(wait_s), "start", timeout=wait_s + 30,
        )  # fmt: skip
        if res.returncode != 0 and self.running_port() != self.port:
            tail = self.logfile.read_text()[-2000:] if self.logfile.exists() else ""
            raise EmbeddedStartError(
                f"embedded PostgreSQL did not start: {res.stderr.strip()}\n{tail}"
            )
        self.started_here = True
        if res.returncode != 0:
            log.warning("embedded PostgreSQL on port %d is still starting up", self.port)
            return self.dsn
        log.info("embedded PostgreSQL started on port %d (data: %s)", self.port, self.pgdata)
        return self.dsn

    def stop(self, mode: str = "fast") -> None:
        if not (self.pgdata / "postmaster.pid").exists():
            return
        self._run(_bin("pg_ctl"), "-D", str(self.pgdata), "-m", mode, "-w", "stop", timeout=60)

    def restart(self) -> None:
        """Start again on the same port (used after `stop()`)."""
        self.requested_port = self.port
        self.start()
