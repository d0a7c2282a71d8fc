"""Memory of a server's process tree, read from /proc/PID/smaps_rollup (Linux >= 4.14).

RSS counts every page a process maps, so pages that forked workers share with their master
are counted once per process and a tree's RSS overstates what it costs. PSS (proportional
set size) divides each page by the number of processes mapping it: the PSS of all the
processes of a machine adds up to the memory they use. USS (private clean + private dirty)
is what a process alone frees when it exits.

PostgreSQL's processes (`postgres` and its children) are never counted as the server's:
`tree_memory` reports them apart (`pg`), whether or not they are in the tree.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.procstat import PROC, ProcStat, process_table, tree

PG_NAMES = ("postgres", "postmaster")


@dataclass(frozen=True)
class ProcMemory:
    """One process: its role in the server (launcher, master, worker, other) and its kB."""

    pid: int
    role: str
    rss_kb: int
    pss_kb: int
    uss_kb: int
    pss_anon_kb: int
    pss_file_kb: int

    def as_dict(self) -> dict[str, int | str]:
        return asdict(self)


def parse_smaps_rollup(text: str) -> dict[str, int]:
    """`Key: N kB` lines of /proc/PID/smaps_rollup, in kB (the header line is skipped)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[key] = int(parts[0])
    return out


def read_rollup(pid: int) -> dict[str, int] | None:
    try:
        return parse_smaps_rollup((PROC / str(pid) / "smaps_rollup").read_text())
    except OSError:  # gone, or not ours
        return None


def cmdline(pid: int) -> list[str]:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def comm(pid: int) -> str:
    try:
        return (PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""


def is_postgres(pid: int) -> bool:
    args = cmdline(pid)
    return comm(pid) in PG_NAMES or bool(args and Path(args[0]).name in PG_NAMES)


def is_gunicorn(args: list[str]) -> bool:
    return any(Path(arg).name == "gunicorn" or arg.startswith("gunicorn:") for arg in args[:3])


def role_of(pid: int, table: dict[int, ProcStat]) -> str:
    """launcher: `queen-threads serve` that stays resident; master: gunicorn's arbiter;
    worker: a child of the master; other: anything else (pg_ctl, a shell)."""
    args = cmdline(pid)
    parent = table[pid].ppid if pid in table else 0
    if is_gunicorn(args):
        return "worker" if is_gunicorn(cmdline(parent)) else "master"
    if any(Path(arg).name == "queen-threads" or arg == "queen_threads.cli" for arg in args):
        return "launcher"
    return "other"


def measure(pid: int, role: str) -> ProcMemory | None:
    roll = read_rollup(pid)
    if roll is None:
        return None
    return ProcMemory(
        pid=pid,
        role=role,
        rss_kb=roll.get("Rss", 0),
        pss_kb=roll.get("Pss", 0),
        uss_kb=roll.get("Private_Clean", 0) + roll.get("Private_Dirty", 0),
        pss_anon_kb=roll.get("Pss_Anon", 0),
        pss_file_kb=roll.get("Pss_File", 0),
    )


@dataclass
class TreeMemory:
    """The server's processes and, apart, PostgreSQL's (those in the tree and `pg_root`'s)."""

    server: list[ProcMemory]
    pg: list[ProcMemory]

    def total(self, field: str = "pss_kb", of: str = "server") -> int:
        return sum(getattr(p, field) for p in getattr(self, of))

    def as_dict(self) -> dict[str, object]:
        return {
            "server": [p.as_dict() for p in self.server],
            "pg": [p.as_dict() for p in self.pg],
            "server_pss_kb": self.total(),
            "server_rss_kb": self.total("rss_kb"),
            "server_uss_kb": self.total("uss_kb"),
            "pg_pss_kb": self.total(of="pg"),
        }


def tree_memory(root: int, pg_root: int | None = None) -> TreeMemory:
    """PSS, RSS and USS of every process under `root`, PostgreSQL's apart."""
    table = process_table()
    server: list[ProcMemory] = []
    pg_pids: set[int] = set(tree(pg_root, table)) if pg_root else set()
    for pid in sorted(tree(root, table)):
        if pid in pg_pids:
            continue
        if is_postgres(pid):
            pg_pids.update(tree(pid, table))
            continue
        with contextlib.suppress(KeyError):
            found = measure(pid, role_of(pid, table))
            if found is not None:
                server.append(found)
    pg = [m for m in (measure(pid, "postgres") for pid in sorted(pg_pids)) if m is not None]
    order = {"launcher": 0, "master": 1, "worker": 2, "other": 3}
    server.sort(key=lambda m: (order.get(m.role, 9), m.pid))
    return TreeMemory(server, pg)


def mb(kb: int) -> str:
    return f"{kb / 1024:.1f}"
