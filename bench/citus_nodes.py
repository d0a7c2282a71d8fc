"""(z)'s databases and servers: a local Citus cluster (coordinator + 2 workers,
tests/support/citus.py) and a plain PostgreSQL 15 of the same machine with the same settings
(without Citus), each migrated by `queen-threads migrate` and served by its own queen-threads
server with the same settings. Also: which postmaster is which node, and what
`citus.log_remote_commands` logged in between (the round trips a window made).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg2
import psycopg2.extensions

from bench import server
from bench.options import Options
from bench.server import Target
from queen_threads import migrate
from queen_threads.embedded import free_port
from tests.support.citus import NODES, SETTINGS, CitusCluster, unavailable

DATABASE = "queen"
# what Citus adds to the nodes' settings: left out of the plain PostgreSQL's
PLAIN_SETTINGS = {
    k: v
    for k, v in SETTINGS.items()
    if not k.startswith("citus.") and k != "shared_preload_libraries"
}
# `citus.log_remote_commands` writes `LOG: issuing <command>` then this DETAIL line naming
# the node the command went to (one line per command sent and waited for: a round trip)
REMOTE_DETAIL = re.compile(r"DETAIL:\s+on server \S+@[\w.:-]+?:(\d+) connectionId")


LINE_PID = re.compile(r"^[^\[\n]*\[(\d+)\] ")


def without_pids(log_text: str, pids: set[int]) -> str:
    """The log's entries except those of the processes `pids` (the nodes' background
    workers, e.g. Citus's maintenance daemon polling for distributed deadlocks). An entry is
    a line with the `[pid]` of the default log_line_prefix and its continuation lines."""
    if not pids:
        return log_text
    kept, keep = [], True
    for line in log_text.splitlines(keepends=True):
        match = LINE_PID.match(line)
        if match:
            keep = int(match.group(1)) not in pids
        if keep:
            kept.append(line)
    return "".join(kept)


def remote_commands(log_text: str, ports: dict[int, str]) -> Counter[str]:
    """Commands `citus.log_remote_commands` says were sent, per destination node name."""
    out: Counter[str] = Counter()
    for match in REMOTE_DETAIL.finditer(log_text):
        port = int(match.group(1))
        out[ports.get(port, f"port {port}")] += 1
    return out


ISSUING = re.compile(r"issuing (.*)")
LITERAL = re.compile(r"'(?:[^']|'')*'")
NUMBER = re.compile(r"\d+")


def command_shapes(log_text: str, width: int = 90) -> Counter[str]:
    """The commands `citus.log_remote_commands` logged, by shape: the first line of each with
    literals and numbers (shard ids, transaction ids) blanked, cut to `width` characters."""
    out: Counter[str] = Counter()
    for match in ISSUING.finditer(log_text):
        shape = NUMBER.sub("N", LITERAL.sub("'?'", match.group(1).strip()))
        out[shape[:width]] += 1
    return out


def cpu_ms_per_op(pct: float | None, seconds: float | None, ops: int) -> float | None:
    """CPU milliseconds per operation from a window's % of one core and its length."""
    if pct is None or seconds is None or ops <= 0:
        return None
    return round(pct / 100 * seconds * 1000 / ops, 4)


def postmaster_pid(data: Path) -> int | None:
    return server.postmaster_pid(data)


def _autocommit(dsn: str) -> psycopg2.extensions.connection:
    conn = psycopg2.connect(dsn, connect_timeout=10)
    conn.autocommit = True
    return conn


class PlainPostgres(CitusCluster):
    """One PostgreSQL 15 cluster of the system's binaries, the Citus nodes' settings without
    Citus (the same `initdb`, user and start as the cluster helper's nodes)."""

    NODE = "plain"
    SETTINGS = PLAIN_SETTINGS

    def start(self) -> str:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.user:
            shutil.chown(self.folder, self.user, self.user)
        data = self._data(self.NODE)
        if not (data / "PG_VERSION").exists():
            proc = self._initdb(data)
            _, err = proc.communicate(timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"initdb of plain PostgreSQL failed: {err.strip()}")
        self.ports[self.NODE] = free_port()
        lines = [f"{k} = {v}" for k, v in self.SETTINGS.items()]
        (data / "postgresql.auto.conf").write_text(
            "\n".join([*lines, f"port = {self.ports[self.NODE]}"]) + "\n"
        )
        proc = self._spawn("pg_ctl", *self._start_args(self.NODE))
        _, err = proc.communicate(timeout=90)
        if proc.returncode != 0:
            raise RuntimeError(f"plain PostgreSQL did not start: {err.strip()}")
        conn = _autocommit(self.dsn(self.NODE))
        try:
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{DATABASE}"')
        finally:
            conn.close()
        return self.dsn(self.NODE, DATABASE)

    def stop(self, mode: str = "fast") -> None:
        data = self._data(self.NODE)
        if (data / "postmaster.pid").exists():
            self._spawn("pg_ctl", "-D", str(data), "-m", mode, "-w", "stop").communicate(timeout=60)


@dataclass
class Side:
    """One database (plain, or the cluster) and the queen-threads server in front of it."""

    name: str
    dsn: str
    nodes: dict[str, int | None]  # node name -> postmaster pid
    target: Target | None = None
    error: str | None = None  # the server would not start


@dataclass
class ScalePair:
    """The plain PostgreSQL 15 and the Citus cluster, each migrated and served."""

    options: Options
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="queen-bench-z-")))
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    cluster: CitusCluster | None = None
    plain_pg: PlainPostgres | None = None
    plain: Side | None = None
    citus: Side | None = None
    skip_pids: dict[str, set[int]] = field(default_factory=dict)  # node -> background pids

    def start(self) -> ScalePair:
        reason = unavailable()
        if reason:
            raise RuntimeError(f"(z) needs a local Citus cluster: {reason}")
        self.folder.chmod(0o755)  # the postgres user (when run as root) reaches its folders
        self.cluster = CitusCluster(self.folder / "citus")
        self.cluster.start()
        citus_dsn = self.cluster.create_database(DATABASE)
        self.plain_pg = PlainPostgres(self.folder / "plain")
        plain_dsn = self.plain_pg.start()
        for dsn in (plain_dsn, citus_dsn):
            migrate.migrate(dsn)
        nodes = {n: postmaster_pid(self.cluster.folder / n) for n in NODES}
        self.plain = Side(
            "plain", plain_dsn, {"postgres": postmaster_pid(self.plain_pg.folder / "plain")}
        )
        self.citus = Side("citus", citus_dsn, nodes)
        for side in (self.plain, self.citus):
            self._serve(side)
        return self

    def _serve(self, side: Side) -> None:
        port = free_port()
        env = server.base_env(self.options, port, side.dsn)
        # No timer is scheduled in (z): the timer firer's safety-net look (every second per
        # process, a read of every timers shard on the cluster) would only add its commands
        # to whichever request it overlaps in the round-trip window. The idle window still
        # measures the rest of the servers' background.
        env["TIMERS_MAX_SLEEP_MS"] = "60000"
        url = f"http://127.0.0.1:{port}"
        log_path = self.folder / f"server-{side.name}.log"
        try:
            self.procs.append(server.spawn("queen_threads.wsgi:app", env, log_path, url))
        except RuntimeError as exc:
            side.error = str(exc)[:2000]
            return
        side.target = Target(url, self.procs[-1].pid, None, side.dsn, True,
                             {k: v for k, v in env.items() if k != "DATABASE_URL"},
                             str(log_path))  # fmt: skip

    @property
    def ports(self) -> dict[int, str]:
        """Port -> node name of the cluster's nodes."""
        assert self.cluster is not None
        return {port: node for node, port in self.cluster.ports.items()}

    def log_paths(self) -> dict[str, Path]:
        assert self.cluster is not None
        return {n: self.cluster.folder / f"{n}.log" for n in NODES}

    def background_pids(self) -> dict[str, set[int]]:
        """Per node, its processes that are not client sessions (what they send is not the
        requests' doing: the maintenance daemon's deadlock detection, 2PC recovery...)."""
        assert self.cluster is not None
        out: dict[str, set[int]] = {}
        for node in NODES:
            conn = _autocommit(self.cluster.dsn(node, DATABASE))
            try:
                with conn.cursor() as cur:
                    cur.execute(
                        "SELECT pid FROM pg_stat_activity WHERE backend_type <> 'client backend'"
                    )
                    out[node] = {int(r[0]) for r in cur.fetchall()}
            finally:
                conn.close()
        return out

    def set_remote_logging(self, on: bool) -> None:
        """`citus.log_remote_commands` on every node, for every session (ALTER SYSTEM + reload:
        the servers' pooled connections take it before their next statement)."""
        assert self.cluster is not None
        for node in NODES:
            conn = _autocommit(self.cluster.dsn(node, DATABASE))
            try:
                with conn.cursor() as cur:
                    # Citus reports each command as a NOTICE: the log must take notices
                    if on:
                        cur.execute("ALTER SYSTEM SET citus.log_remote_commands = on")
                        cur.execute("ALTER SYSTEM SET log_min_messages = notice")
                    else:
                        cur.execute("ALTER SYSTEM RESET citus.log_remote_commands")
                        cur.execute("ALTER SYSTEM RESET log_min_messages")
                    cur.execute("SELECT pg_reload_conf()")
            finally:
                conn.close()
        time.sleep(0.2)  # the postmasters signal their backends; each applies it when idle
        self.skip_pids = self.background_pids() if on else {}

    def log_marks(self) -> dict[str, int]:
        marks = {}
        for node, path in self.log_paths().items():
            try:
                marks[node] = path.stat().st_size
            except OSError:
                marks[node] = 0
        return marks

    def remote_since(self, marks: dict[str, int]) -> tuple[dict[str, Counter[str]], Counter[str]]:
        """Per node that sent them: the commands sent to each node since `marks`; and the
        shapes of those commands ("sender: command")."""
        out: dict[str, Counter[str]] = {}
        shapes: Counter[str] = Counter()
        for node, path in self.log_paths().items():
            with path.open("rb") as f:
                f.seek(marks.get(node, 0))
                text = without_pids(
                    f.read().decode(errors="replace"), self.skip_pids.get(node, set())
                )
            out[node] = remote_commands(text, self.ports)
            shapes.update({f"{node}: {k}": n for k, n in command_shapes(text).items()})
        return out, shapes

    def stop(self) -> None:
        server.stop_all(self.procs)
        for db in (self.cluster, self.plain_pg):
            if db is not None:
                with contextlib.suppress(Exception):
                    db.stop("fast")
        if self.options.keep:
            print(f"bench: (z) data kept in {self.folder}", flush=True)
        else:
            shutil.rmtree(self.folder, ignore_errors=True)
