"""scripts/bench /proc parsing: process stat, trees, RSS, machine ticks, listening sockets."""

from __future__ import annotations

import os

from bench.procstat import (
    ProcStat,
    other_cpu,
    parse_listening_inodes,
    parse_machine_ticks,
    parse_stat,
    parse_status_kb,
    process_table,
    tree,
    tree_root,
    tree_ticks,
)

STAT = (
    "4242 (gunicorn: worker (queen) x) S 4200 4200 4200 0 -1 4194560 1000 0 0 0 "
    "150 30 7 3 20 0 3 0 12345 1000000 5000 18446744073709551615"
)


def test_parse_stat_with_spaces_and_parentheses_in_the_name() -> None:
    assert parse_stat(STAT) == ProcStat(pid=4242, ppid=4200, ticks=180, child_ticks=10)


def test_tree_and_ticks_include_reaped_children() -> None:
    table = {
        1: ProcStat(1, 0, 5, 0),
        10: ProcStat(10, 1, 100, 40),
        11: ProcStat(11, 10, 20, 0),
        12: ProcStat(12, 10, 30, 5),
        13: ProcStat(13, 12, 1, 0),
        20: ProcStat(20, 1, 999, 0),
    }
    assert sorted(tree(10, table)) == [10, 11, 12, 13]
    assert tree_ticks(10, table) == 100 + 40 + 20 + 30 + 5 + 1
    assert tree_ticks(99, table) is None
    assert tree_root([11, 12, 10, 13], table) == 10


def test_own_process_is_in_the_live_table() -> None:
    table = process_table()
    assert os.getpid() in table
    assert os.getpid() in tree(os.getppid(), table)


def test_parse_status_kb() -> None:
    text = "Name:\tpython\nVmPeak:\t  2000 kB\nVmRSS:\t  1234 kB\n"
    assert parse_status_kb(text, "VmRSS") == 1234
    assert parse_status_kb("MemTotal:       24684132 kB\n", "MemTotal") == 24684132
    assert parse_status_kb(text, "VmSwap") is None


def test_machine_ticks_count_idle_and_iowait_as_not_busy() -> None:
    text = "cpu  100 5 50 800 40 2 3 0 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
    busy, total = parse_machine_ticks(text)
    assert total == 100 + 5 + 50 + 800 + 40 + 2 + 3 + 0
    assert busy == total - 800 - 40


def test_listening_inodes_by_port() -> None:
    text = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:18E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 "
        "       0 5551 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0100007F:18E8 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0 "
        "       0 5552 1 0000000000000000 20 4 30 10 -1\n"
        "   2: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 "
        "       0 5553 1 0000000000000000 100 0 0 10 0\n"
    )
    assert parse_listening_inodes(text, 6376) == {5551}
    assert parse_listening_inodes(text, 8080) == {5553}
    assert parse_listening_inodes(text, 1) == set()


def test_other_cpu_is_machine_minus_watched() -> None:
    result = {"server": 50.0, "postgres": 80.0, "loadgen": 10.0, "machine": 190.0, "seconds": 3}
    assert other_cpu(result) == 50.0  # type: ignore[arg-type]
    assert other_cpu({"server": 10.0, "machine": 5.0}) == 0.0
    assert other_cpu({"server": None, "machine": None}) is None


def test_other_cpu_ignores_busiest_child_figures() -> None:
    result = {"server": 100.0, "server_busiest": 90.0, "machine": 150.0}
    assert other_cpu(result) == 50.0  # type: ignore[arg-type]


def test_cpu_window_reports_the_busiest_child_of_a_tree() -> None:
    import time as _time

    from bench.procstat import CpuWindow

    window = CpuWindow({"server": os.getppid()}).start()
    _time.sleep(0.05)
    result = window.stop()
    assert result["seconds"] is not None and result["seconds"] > 0
    assert "server_busiest" in result  # this test process is a child of its parent
    assert result["loadgen"] is not None


def test_cpu_window_keeps_a_child_apart_from_its_root() -> None:
    import subprocess
    import sys

    from bench.procstat import CpuWindow

    # the child spins for 0.3 s of CPU, says so, then blocks until told to go
    spin = (
        "import sys, time\nwhile time.process_time() < 0.3: pass\n"
        "print('spun', flush=True)\nsys.stdin.read()"
    )
    burner = subprocess.Popen(
        [sys.executable, "-c", spin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert burner.stdout is not None
        window = CpuWindow({"tests": os.getpid()}, {"burner": ("tests", burner.pid)}).start()
        assert burner.stdout.readline() == "spun\n"  # this process blocks meanwhile
        result = window.stop()
    finally:
        burner.kill()
        burner.wait()
    # the burner's 0.3 s of CPU is counted (as CPU seconds: its % of a core depends on how
    # busy the machine is, e.g. with the suite running on every core)
    assert result["burner"] is not None and result["seconds"] is not None
    assert result["burner"] / 100 * result["seconds"] > 0.2
    assert result["tests"] is not None and result["tests"] < result["burner"] / 2
