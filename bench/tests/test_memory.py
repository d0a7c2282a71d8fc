"""bench/memory.py: smaps_rollup parsing, roles of a server's processes, a live tree."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.memory import is_gunicorn, parse_smaps_rollup, tree_memory

ROLLUP = """\
55d4c9a4b000-7ffd3a5f2000 ---p 00000000 00:00 0                          [rollup]
Rss:               43340 kB
Pss:               21612 kB
Pss_Anon:          20968 kB
Pss_File:            644 kB
Shared_Clean:      19500 kB
Private_Clean:       120 kB
Private_Dirty:     15300 kB
"""


def test_rollup_values_in_kb_and_the_header_skipped() -> None:
    values = parse_smaps_rollup(ROLLUP)
    assert values["Rss"] == 43340 and values["Pss"] == 21612
    assert values["Private_Clean"] + values["Private_Dirty"] == 15420
    assert len(values) == 7


def test_gunicorn_processes_by_their_command_line() -> None:
    assert is_gunicorn(["/venv/bin/python", "-m", "gunicorn", "-c", "conf.py", "app:app"])
    assert is_gunicorn(["gunicorn: worker [queen-threads]"])
    assert not is_gunicorn(["/venv/bin/python", "/venv/bin/queen-threads", "serve"])


def test_a_live_tree_counts_every_process_and_keeps_none_twice() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        found = tree_memory(os.getpid())
        pids = [p.pid for p in found.server]
        assert os.getpid() in pids and child.pid in pids and len(set(pids)) == len(pids)
        assert all(p.pss_kb <= p.rss_kb for p in found.server)
        assert found.total() > 0
    finally:
        child.kill()
        child.wait()
