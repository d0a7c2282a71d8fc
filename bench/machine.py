"""What the figures were measured on: machine, Python, PostgreSQL and its settings, the code."""

from __future__ import annotations

import os
import platform
import subprocess
from contextlib import suppress
from pathlib import Path
from typing import Any

from bench import procstat
from queen_threads.paths import ROOT

PG_SETTINGS = (
    "server_version",
    "fsync",
    "synchronous_commit",
    "wal_sync_method",
    "full_page_writes",
    "commit_delay",
    "shared_buffers",
    "work_mem",
    "effective_cache_size",
    "max_connections",
    "max_wal_size",
    "checkpoint_timeout",
    "wal_level",
    "wal_buffers",
    "jit",
)


def machine() -> dict[str, Any]:
    model = ""
    with suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    meminfo = ""
    with suppress(OSError):
        meminfo = Path("/proc/meminfo").read_text()
    mem_kb = procstat.parse_status_kb(meminfo, "MemTotal") or 0
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "memory_mb": round(mem_kb / 1024),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
    }


def code_version() -> dict[str, Any]:
    def git(*args: str) -> str:
        res = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=10
        )
        return res.stdout.strip()

    try:
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return {"commit": git("rev-parse", "HEAD"), "dirty_files": dirty.splitlines()}
    except (OSError, subprocess.SubprocessError):
        return {}


def postgres(dsn: str | None) -> dict[str, Any]:
    """version() and the settings that bound write throughput; {} without a DSN."""
    if not dsn:
        return {}
    from queen_threads.db import connect_raw

    conn = connect_raw(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT version()")
            row = cur.fetchone()
            info: dict[str, Any] = {"version": row[0] if row else None, "settings": {}}
            for name in PG_SETTINGS:
                cur.execute(f"SHOW {name}")
                setting = cur.fetchone()
                info["settings"][name] = setting[0] if setting else None
        return info
    finally:
        conn.close()
