"""CPU and memory of process trees, read from /proc (Linux only).

A tree's CPU time is the utime+stime of its live processes plus the cutime+cstime they
collected from children they reaped, so short-lived PostgreSQL backends are not lost.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    ticks: int  # utime + stime
    child_ticks: int  # cutime + cstime (reaped children)


def parse_stat(text: str) -> ProcStat:
    """Parse /proc/<pid>/stat (the command name may contain spaces and parentheses)."""
    left = text.index("(")
    right = text.rindex(")")
    pid = int(text[:left].strip())
    fields = text[right + 2 :].split()
    # fields[0] is field 3 (state); utime..cstime are fields 14..17
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ProcStat(pid, ppid, utime + stime, cutime + cstime)


def read_stat(pid: int) -> ProcStat | None:
    try:
        return parse_stat((PROC / str(pid) / "stat").read_text())
    except (OSError, ValueError):
        return None


def process_table() -> dict[int, ProcStat]:
    table: dict[int, ProcStat] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = read_stat(int(entry.name))
            if stat is not None:
                table[stat.pid] = stat
    return table


def tree(root: int, table: dict[int, ProcStat]) -> list[int]:
    """`root` and all its live descendants (empty when root is gone)."""
    if root not in table:
        return []
    children: dict[int, list[int]] = {}
    for stat in table.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def tree_ticks(root: int, table: dict[int, ProcStat]) -> int | None:
    pids = tree(root, table)
    if not pids:
        return None
    return sum(table[p].ticks + table[p].child_ticks for p in pids)


def parse_status_kb(text: str, key: str) -> int | None:
    """A `kB` value (e.g. VmRSS) from /proc/<pid>/status or /proc/meminfo text."""
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def rss_kb(pid: int) -> int:
    try:
        return parse_status_kb((PROC / str(pid) / "status").read_text(), "VmRSS") or 0
    except OSError:
        return 0


def tree_rss_kb(root: int, table: dict[int, ProcStat] | None = None) -> int:
    return sum(rss_kb(p) for p in tree(root, table or process_table()))


def pss_kb(pid: int) -> int:
    """Proportional set size: shared pages split between the processes sharing them."""
    try:
        return parse_status_kb((PROC / str(pid) / "smaps_rollup").read_text(), "Pss") or 0
    except OSError:
        return 0


def tree_pss_kb(root: int, table: dict[int, ProcStat] | None = None) -> int:
    """PSS summed over a process tree (a server's total memory, shared pages counted once)."""
    return sum(pss_kb(p) for p in tree(root, table or process_table()))


def parse_machine_ticks(text: str) -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat; idle and iowait are not busy."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = [int(x) for x in line.split()[1:]]
            total = sum(values[:8])  # guest time is already inside user/nice
            idle = values[3] + (values[4] if len(values) > 4 else 0)
            return total - idle, total
    raise ValueError("no cpu line in /proc/stat")


def machine_ticks() -> tuple[int, int]:
    return parse_machine_ticks((PROC / "stat").read_text())


def parse_listening_inodes(text: str, port: int) -> set[int]:
    """Socket inodes listening (state 0A) on `port` in /proc/net/tcp or tcp6 text."""
    inodes: set[int] = set()
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 10:
            continue
        local, state, inode = cols[1], cols[3], cols[9]
        if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
            inodes.add(int(inode))
    return inodes


def pids_listening(port: int) -> set[int]:
    """Processes holding a socket that listens on TCP `port` on this machine."""
    inodes: set[int] = set()
    for name in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            inodes |= parse_listening_inodes((PROC / "net" / name).read_text(), port)
    targets = {f"socket:[{i}]" for i in inodes}
    found: set[int] = set()
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in targets:
                    found.add(int(entry.name))
                    break
        except OSError:
            continue
    return found


def tree_root(pids: Iterable[int], table: dict[int, ProcStat] | None = None) -> int | None:
    """The one pid of `pids` whose parent is not in `pids` (e.g. the gunicorn master)."""
    table = table or process_table()
    members = set(pids)
    roots = [p for p in members if p in table and table[p].ppid not in members]
    return min(roots) if roots else None


@dataclass
class CpuWindow:
    """CPU used by named process trees, this process and the machine between start and stop.

    ``apart`` names direct children of a root that are reported on their own and not in
    their root's figure: ``{"pg_sampler": ("postgres", pid)}`` keeps the bench's own
    PostgreSQL backend (the wait sampler) out of the PostgreSQL figure.
    """

    roots: dict[str, int | None]
    apart: dict[str, tuple[str, int]] = field(default_factory=dict)
    started: float = 0.0
    before: dict[str, int | None] = field(default_factory=dict)
    result: dict[str, float | None] = field(default_factory=dict)

    def _sample(self) -> dict[str, int | None]:
        table = process_table()
        sample: dict[str, int | None] = {
            name: (tree_ticks(pid, table) if pid else None) for name, pid in self.roots.items()
        }
        for name, pid in self.roots.items():
            # each direct child's own tree (a gunicorn worker, a PostgreSQL backend)
            for child in (s.pid for s in table.values() if pid and s.ppid == pid):
                sample[f"{name}_child_{child}"] = tree_ticks(child, table)
        own = table.get(os.getpid())
        sample["loadgen"] = own.ticks if own else None
        sample["machine"] = machine_ticks()[0]
        return sample

    def start(self) -> CpuWindow:
        self.before = self._sample()
        self.started = time.monotonic()
        return self

    def stop(self) -> dict[str, float | None]:
        """% of one core per name (machine: busy % summed over all cores)."""
        after = self._sample()
        elapsed = time.monotonic() - self.started
        busiest: dict[str, float] = {}
        carved = {f"{root}_child_{pid}": (name, root) for name, (root, pid) in self.apart.items()}
        for name, end in after.items():
            begin = self.before.get(name)
            pct = None
            if begin is not None and end is not None and elapsed > 0:
                pct = round((end - begin) / CLK_TCK / elapsed * 100, 1)
            if name in carved:
                own, root = carved[name]
                self.result[own] = pct
                continue
            if "_child_" in name:
                root = name.split("_child_")[0]
                if pct is not None and pct > busiest.get(root, -1.0):
                    busiest[root] = pct
                continue
            self.result[name] = pct
        for own, root in carved.values():
            part, whole = self.result.get(own), self.result.get(root)
            if part is not None and whole is not None:
                self.result[root] = round(max(0.0, whole - part), 1)
        self.result["other"] = other_cpu(self.result)
        for root, pct in busiest.items():
            self.result[f"{root}_busiest"] = pct  # the busiest worker / backend
        self.result["seconds"] = round(elapsed, 3)
        return self.result


def other_cpu(result: dict[str, float | None]) -> float | None:
    """Machine busy minus the watched trees and this process: everything else on the box."""
    busy = result.get("machine")
    if busy is None:
        return None
    ours = sum(
        v or 0.0
        for k, v in result.items()
        if k not in ("machine", "other", "seconds") and not k.endswith("_busiest")
    )
    return round(max(0.0, busy - ours), 1)
