"""py-spy profiles of the server workers during a measured window, and their summary.

`py-spy record --format raw` writes collapsed stacks ("outer;...;inner count" per line);
the summary ranks functions by self samples (time spent in that frame) and by inclusive
samples (time with that frame anywhere on the stack).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LOCATION = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
_SHORTEN = re.compile(r"^.*(?:site-packages/|lib/python3\.\d+/|/(?=queen_threads/))")


def py_spy() -> str | None:
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


def frame_name(frame: str) -> str:
    """`func (path/to/file.py:123)` -> `func (file path from the package root)`."""
    match = _LOCATION.match(frame.strip())
    if not match:
        return frame.strip()
    return f"{match['func']} ({_SHORTEN.sub('', match['file'], count=1)})"


def parse_collapsed(text: str) -> list[tuple[list[str], int]]:
    stacks: list[tuple[list[str], int]] = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        stacks.append(([frame_name(f) for f in stack.split(";")], int(count)))
    return stacks


def is_python(frame: str) -> bool:
    return frame.endswith(".py)")


@dataclass(frozen=True)
class ProfileSummary:
    samples: int
    self_top: list[tuple[str, int]]
    python_self_top: list[tuple[str, int]]
    inclusive_top: list[tuple[str, int]]

    def as_dict(self) -> dict[str, Any]:
        def pct(n: int) -> float:
            return round(100 * n / self.samples, 1) if self.samples else 0.0

        return {
            "samples": self.samples,
            "self": [{"frame": f, "samples": n, "pct": pct(n)} for f, n in self.self_top],
            "python_self": [
                {"frame": f, "samples": n, "pct": pct(n)} for f, n in self.python_self_top
            ],
            "inclusive": [{"frame": f, "samples": n, "pct": pct(n)} for f, n in self.inclusive_top],
        }


def summarise(stacks: Iterable[tuple[list[str], int]], top: int = 30) -> ProfileSummary:
    own: Counter[str] = Counter()
    python_own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for frames, count in stacks:
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        python_own[next((f for f in reversed(frames) if is_python(f)), "(no Python frame)")] += (
            count
        )
        for frame in set(frames):
            inclusive[frame] += count
    return ProfileSummary(
        total, own.most_common(top), python_own.most_common(top), inclusive.most_common(top)
    )


class Profiler:
    """py-spy on each given pid from start() until stop() (SIGINT makes it write its file)."""

    def __init__(
        self, out_dir: Path, label: str, pids: list[int], rate: int = 100, native: bool = False
    ) -> None:
        self.out_dir = out_dir
        self.label = label
        self.pids = pids
        self.rate = rate
        self.native = native
        self.procs: list[tuple[int, Path, subprocess.Popen[bytes]]] = []

    def start(self) -> Profiler:
        exe = py_spy()
        if exe is None:
            raise RuntimeError("py-spy not found: .venv/bin/pip install py-spy")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for pid in self.pids:
            out = self.out_dir / f"{self.label}-{pid}.txt"
            # Python frames only, without pausing the worker: light enough to leave the
            # workload as it is. --native (C frames, syscalls) pauses and costs a lot more.
            mode = ["--native"] if self.native else ["--nonblocking"]
            proc = subprocess.Popen(
                [exe, "record", "--pid", str(pid), "--rate", str(self.rate), "--format", "raw",
                 *mode, "--output", str(out)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )  # fmt: skip
            self.procs.append((pid, out, proc))
        return self

    def stop(self) -> dict[str, Any]:
        stacks: list[tuple[list[str], int]] = []
        errors: list[str] = []
        for pid, out, proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if out.exists():
                stacks += parse_collapsed(out.read_text(errors="replace"))
            else:
                errors.append(f"pid {pid}: {err.decode(errors='replace').strip()[-300:]}")
        summary = summarise(stacks).as_dict()
        summary["files"] = [str(out) for _, out, _ in self.procs]
        if errors:
            summary["errors"] = errors
        return summary


def summary_markdown(label: str, summary: dict[str, Any], top: int = 20) -> str:
    lines = [f"### {label}: {summary['samples']} samples (all server workers)", ""]
    lines += ["| self % | frame (self time, native frames included) |", "| ---: | --- |"]
    lines += [f"| {e['pct']} | `{e['frame']}` |" for e in summary["self"][:top]]
    lines += ["", "| self % | innermost Python function |", "| ---: | --- |"]
    lines += [f"| {e['pct']} | `{e['frame']}` |" for e in summary["python_self"][:top]]
    lines += ["", "| incl. % | function (inclusive time) |", "| ---: | --- |"]
    lines += [f"| {e['pct']} | `{e['frame']}` |" for e in summary["inclusive"][:top]]
    return "\n".join(lines)
