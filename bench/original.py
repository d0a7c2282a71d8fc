"""The original Queen server (`../shared/original/run`), started beside the server under test.

(x) compares the two in one run (`--original`): the original gets a fresh database of the
same PostgreSQL (it creates its own `queen` schema there at start), over the same route as
the server under test (the Unix socket of the bench's embedded PostgreSQL, or the host of
--database-url), and its own free port. The run script execs the server binary, so the
process it starts is the server (its CPU is that process's).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from bench.server import Target, dsn_port, log_tail, stop_all, wait_healthy
from queen_threads.embedded import free_port
from queen_threads.paths import ROOT

DEFAULT_RUN = ROOT.parent / "shared" / "original" / "run"


def database_dsn(dsn: str, database: str) -> str:
    """`dsn` (a postgresql:// URL) naming another database."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{database}"))


def libpq_env(dsn: str, database: str) -> dict[str, str]:
    """The original's PG_* variables for `database` on the server of `dsn` (a socket folder
    given as `?host=` is a host to libpq too)."""
    parts = urlsplit(dsn)
    query = parse_qs(parts.query)
    host = query.get("host", [parts.hostname or "127.0.0.1"])[0]
    return {
        "PG_HOST": unquote(host),
        "PG_PORT": str(dsn_port(dsn)),
        "PG_USER": unquote(parts.username or "postgres"),
        "PG_PASSWORD": unquote(parts.password or "postgres"),
        "PG_DB": database,
    }


class OriginalServer:
    """The original server on a fresh database of the PostgreSQL at `admin_dsn`."""

    def __init__(self, run: str | Path, admin_dsn: str, pg_pid: int | None, workers: int) -> None:
        self.run = Path(run)
        self.admin_dsn = admin_dsn
        self.pg_pid = pg_pid
        self.workers = workers
        self.database = f"queen_original_{secrets.token_hex(4)}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.log_path = Path(tempfile.mkstemp(prefix="queen-bench-original-", suffix=".log")[1])

    def start(self) -> Target:
        if not self.run.is_file():
            raise RuntimeError(f"--original: no run script at {self.run}")
        self._sql(f'CREATE DATABASE "{self.database}"')
        port = free_port()
        env = os.environ | libpq_env(self.admin_dsn, self.database)
        env |= {"NUM_WORKERS": str(self.workers), "LOG_LEVEL": "warn"}
        url = f"http://127.0.0.1:{port}"
        with self.log_path.open("wb") as log:
            proc = subprocess.Popen(
                ["bash", str(self.run), str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        self.procs.append(proc)
        try:
            wait_healthy(url, 60, proc)
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(f"--original: {exc}\n{log_tail(self.log_path)}") from exc
        dsn = database_dsn(self.admin_dsn, self.database)
        return Target(url, proc.pid, self.pg_pid, dsn, True,
                      {"NUM_WORKERS": str(self.workers)}, str(self.log_path))  # fmt: skip

    def stop(self) -> None:
        stop_all(self.procs)
        try:
            self._sql(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        except Exception as exc:  # the bench's results matter more than the cleanup
            print(f"bench: --original: could not drop {self.database}: {exc}")

    def _sql(self, statement: str) -> None:
        from queen_threads.db import connect_raw

        conn = connect_raw(self.admin_dsn)
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
        finally:
            conn.close()
