"""Debian's `pgbouncer`, started by a test in front of the test PostgreSQL.

`PgBouncer(target_dsn).start()` writes an ini file and a user list into a temporary
folder, listens on a free loopback port (no Unix socket) in **transaction** pool mode with
a small server pool, forwards every database name to the target server, and returns once
its admin console accepts connections. Clients are trusted (as the embedded PostgreSQL
trusts them); the user list carries the target's password, if any, for the server logins.
It never lists `options` in `ignore_startup_parameters`: a client that sends startup
options is refused, as by a production PgBouncer.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extensions

from queen_threads.embedded import free_port

BINARY = "/usr/sbin/pgbouncer"
INSTALL = "DEBIAN_FRONTEND=noninteractive apt-get install -y pgbouncer"
RUN_AS = "nobody"  # pgbouncer refuses to run as root


def _quote(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


class PgBouncer:
    """One pgbouncer process; `dsn(dbname)` is how clients reach a database through it."""

    def __init__(self, target_dsn: str, pool_size: int = 2) -> None:
        if not os.access(BINARY, os.X_OK):
            raise RuntimeError(f"{BINARY} is missing: install it with `{INSTALL}` (as root)")
        probe = psycopg2.connect(target_dsn)
        try:
            self.user = probe.info.user
            self.password = probe.info.password or ""
            self.target_host = probe.info.host
            self.target_port = probe.info.port
        finally:
            probe.close()
        self.pool_size = pool_size
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="queen-test-pgbouncer-"))
        self.log_path = self.folder / "pgbouncer.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def dsn(self, dbname: str) -> str:
        return psycopg2.extensions.make_dsn(
            host="127.0.0.1", port=self.port, user=self.user, dbname=dbname, sslmode="disable"
        )

    def _write_config(self) -> Path:
        users = self.folder / "userlist.txt"
        users.write_text(f"{_quote(self.user)} {_quote(self.password)}\n")
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"* = host={self.target_host} port={self.target_port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {users}\n"
            f"admin_users = {self.user}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {self.pool_size}\n"
            "max_client_conn = 500\n"
        )
        # Readable by the unprivileged user pgbouncer switches to.
        self.folder.chmod(0o755)
        for path in (users, ini):
            path.chmod(0o644)
        return ini

    def start(self, timeout: float = 20) -> PgBouncer:
        ini = self._write_config()
        command = [BINARY, *(["-u", RUN_AS] if os.geteuid() == 0 else []), str(ini)]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited at start:\n{self.logs()}")
            try:
                self.admin().close()
                return self
            except psycopg2.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"pgbouncer not accepting in {timeout}s ({exc}):\n{self.logs()}"
                    ) from exc
            time.sleep(0.05)

    def admin(self) -> psycopg2.extensions.connection:
        """A connection to the admin console (the `pgbouncer` database)."""
        conn = psycopg2.connect(self.dsn("pgbouncer"), connect_timeout=2)
        conn.autocommit = True
        return conn

    def show(self, what: str) -> list[dict[str, Any]]:
        """`SHOW CLIENTS`, `SHOW SERVERS`, `SHOW POOLS`, ... as dictionaries."""
        assert what.isalpha(), what
        conn = self.admin()
        try:
            with conn.cursor() as cur:
                cur.execute(f"SHOW {what}")
                names = [d[0] for d in cur.description or ()]
                return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        finally:
            conn.close()

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
