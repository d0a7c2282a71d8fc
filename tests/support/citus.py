"""A local Citus cluster for tests: a coordinator and two workers, each its own PostgreSQL 15
cluster (`initdb` data folder, port) of the system's PostgreSQL, with Citus preloaded.

Citus is not shipped by the project (users install Citus's packages or use a managed
Citus); `../shared/citus/install` puts it into Debian's PostgreSQL 15. `unavailable()` says
why the cluster cannot run here (None when it can). PostgreSQL refuses to run as root: when
run as root, the servers run as the `postgres` user and the folder is handed to it.

    python -m tests.support.citus start FOLDER   # prints the coordinator's DSN
    python -m tests.support.citus stop FOLDER
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psycopg2
import psycopg2.errors
import psycopg2.extensions

from queen_threads.embedded import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_LIB = Path("/usr/lib/postgresql/15/lib")
CONTROL = Path("/usr/share/postgresql/15/extension/citus.control")
NODES = ("coordinator", "worker1", "worker2")
SYSTEM_USER = "postgres"

# A throwaway cluster: surviving an operating-system crash is not what it is for.
SETTINGS = {
    "shared_preload_libraries": "'citus'",
    "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''",
    "max_connections": "200",
    "shared_buffers": "32MB",
    "fsync": "off",
    "full_page_writes": "off",
    # on: a commit is in the kernel's hands when acknowledged, so it survives a node's
    # process crash (the faults test stops a worker with `immediate`); without fsync that
    # costs a write per commit, not a flush
    "synchronous_commit": "on",
    "citus.shard_count": "8",  # 4 shards per worker: plenty to spread partitions
    "citus.log_distributed_deadlock_detection": "off",
    "max_worker_processes": "16",
    "logging_collector": "off",
    # the nodes' connections to each other: no TLS (libpq would look for client
    # certificates in the HOME of whoever started the servers)
    "citus.node_conninfo": "'sslmode=disable'",
}


def unavailable() -> str | None:
    """Why a local Citus cluster cannot run on this machine, or None."""
    if not (PG_BIN / "postgres").exists():
        return f"no PostgreSQL 15 at {PG_BIN} (apt-get install postgresql-15)"
    if not (PG_LIB / "citus.so").exists() or not CONTROL.exists():
        return f"the Citus extension is not installed for PostgreSQL 15 ({PG_LIB / 'citus.so'})"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            return f"running as root and there is no `{SYSTEM_USER}` user to run PostgreSQL"
    return None


class CitusCluster:
    """Coordinator + 2 workers under `folder` (one data folder and port each)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder).resolve()
        self.user = SYSTEM_USER if os.geteuid() == 0 else None
        self.ports: dict[str, int] = {}

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), user=self.user, check=False, capture_output=True, text=True,
            timeout=timeout, cwd="/",
        )  # fmt: skip

    def _data(self, node: str) -> Path:
        return self.folder / node

    def dsn(self, node: str = "coordinator", dbname: str = "postgres") -> str:
        port = self.ports[node]
        return f"postgresql://postgres@127.0.0.1:{port}/{dbname}?sslmode=disable"

    def start(self) -> str:
        """initdb (first time) and start the three servers; the coordinator's DSN."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.user:
            shutil.chown(self.folder, self.user, self.user)
        procs = []
        for node in NODES:
            data = self._data(node)
            if not (data / "PG_VERSION").exists():
                procs.append((node, self._initdb(data)))
        for node, proc in procs:
            _, err = proc.communicate(timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"initdb of {node} failed: {err.strip()}")
        for node in NODES:
            self.ports[node] = free_port()
            self._write_settings(self._data(node), self.ports[node])
        starts = [self._spawn("pg_ctl", *self._start_args(n)) for n in NODES]
        for node, proc in zip(NODES, starts, strict=True):
            _, err = proc.communicate(timeout=90)
            if proc.returncode != 0:
                log = self.folder / f"{node}.log"
                tail = log.read_text()[-1500:] if log.exists() else ""
                raise RuntimeError(f"{node} did not start: {err.strip()}\n{tail}")
        return self.dsn()

    def _initdb(self, data: Path) -> subprocess.Popen[str]:
        return self._spawn("initdb", "-D", str(data), "-U", "postgres", "--auth=trust",
                           "--encoding=UTF8", "--locale=C", "--no-sync")  # fmt: skip

    def _start_args(self, node: str) -> list[str]:
        log = str(self.folder / f"{node}.log")
        return ["-D", str(self._data(node)), "-l", log, "-w", "-t", "60", "start"]

    def _spawn(self, program: str, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(PG_BIN / program), *args], user=self.user, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd="/",
        )  # fmt: skip

    def _write_settings(self, data: Path, port: int) -> None:
        lines = [f"{k} = {v}" for k, v in SETTINGS.items()] + [f"port = {port}"]
        (data / "postgresql.auto.conf").write_text("\n".join(lines) + "\n")

    def stop(self, mode: str = "immediate") -> None:
        procs = [
            self._spawn("pg_ctl", "-D", str(self._data(n)), "-m", mode, "-w", "stop")
            for n in NODES
            if (self._data(n) / "postmaster.pid").exists()
        ]
        for proc in procs:
            proc.communicate(timeout=60)

    def stop_node(self, node: str, mode: str = "immediate") -> None:
        """Stop one node (a worker "failing"); `start_node` brings it back on its port."""
        proc = self._spawn("pg_ctl", "-D", str(self._data(node)), "-m", mode, "-w", "stop")
        _, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"{node} did not stop: {err.strip()}")

    def start_node(self, node: str) -> None:
        """Start a stopped node again, on the port its settings keep."""
        proc = self._spawn("pg_ctl", *self._start_args(node))
        _, err = proc.communicate(timeout=90)
        if proc.returncode != 0:
            raise RuntimeError(f"{node} did not start: {err.strip()}")

    def create_database(self, name: str, workers: int = 2) -> str:
        """A database on every node with the extension, the nodes registered (the first
        `workers` workers); its DSN on the coordinator. (Registration is per database, and
        so is the extension.)"""
        for node in NODES:
            conn = _autocommit(self.dsn(node))
            try:
                with conn.cursor() as cur:
                    cur.execute(f'CREATE DATABASE "{name}"')
            finally:
                conn.close()
            conn = _autocommit(self.dsn(node, name))
            try:
                with conn.cursor() as cur:
                    cur.execute("CREATE EXTENSION citus")
            finally:
                conn.close()
        conn = _autocommit(self.dsn("coordinator", name))
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT citus_set_coordinator_host('127.0.0.1', %s)",
                    (self.ports["coordinator"],),
                )
                for node in NODES[1 : 1 + workers]:
                    cur.execute("SELECT citus_add_node('127.0.0.1', %s)", (self.ports[node],))
        finally:
            conn.close()
        return self.dsn("coordinator", name)

    def copy_database(self, template: str, name: str) -> str:
        """`name` as a copy of `template` on every node (the shards and Citus's metadata
        come along: the nodes' names and ports are the same); its DSN on the coordinator.
        A template takes no connections from then on: PostgreSQL copies only a database
        nobody is connected to, and Citus keeps connections to its databases open (the
        maintenance daemon, the coordinator's connections to the workers)."""
        for node in NODES:
            conn = _autocommit(self.dsn(node))
            try:
                with conn.cursor() as cur:
                    cur.execute(f'ALTER DATABASE "{template}" WITH ALLOW_CONNECTIONS false')
                    _copy_when_idle(cur, template, name)
            finally:
                conn.close()
        return self.dsn("coordinator", name)

    def drop_database(self, name: str) -> None:
        for node in NODES:
            conn = _autocommit(self.dsn(node))
            try:
                with conn.cursor() as cur:
                    cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                conn.close()

    def load_ports(self) -> None:
        """The ports of servers already running in the folder (for `stop` from a script)."""
        for node in NODES:
            pidfile = self._data(node) / "postmaster.pid"
            if pidfile.exists():
                self.ports[node] = int(pidfile.read_text().splitlines()[3])


def _copy_when_idle(cur: psycopg2.extensions.cursor, template: str, name: str) -> None:
    """CREATE DATABASE name TEMPLATE template, once the sessions still on the template
    (which takes no new ones) are gone."""
    deadline = time.monotonic() + 30
    while True:
        cur.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (template,),
        )
        try:
            cur.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
            return
        except psycopg2.errors.ObjectInUse:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _autocommit(dsn: str) -> psycopg2.extensions.connection:
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = psycopg2.connect(dsn, connect_timeout=5)
            break
        except psycopg2.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    conn.autocommit = True
    return conn


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python -m tests.support.citus start|stop FOLDER", file=sys.stderr)
        return 2
    reason = unavailable()
    if reason:
        print(f"citus: cannot run a local cluster: {reason}", file=sys.stderr)
        return 2
    cluster = CitusCluster(argv[1])
    if argv[0] == "stop":
        cluster.stop("fast")
        return 0
    cluster.start()
    dsn = cluster.create_database("queen")
    print(dsn)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
