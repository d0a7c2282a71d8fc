"""gunicorn configuration for `scripts/bench --cpu-profile DIR`: the server's own
(`config/gunicorn.conf.py`, unchanged) plus a CPU-time sampler in every worker.

SIGPROF fires per millisecond of the worker's CPU time (ITIMER_PROF: user + system), and
the handler counts the Python stack that was running, whichever greenlet it belongs to:
time spent waiting (on a socket, on the database, in epoll) is never sampled, time a
runnable worker spends preempted by other processes neither. (py-spy, `--profile`,
samples by wall clock: on a loaded machine a worker preempted inside a send() counts as
busy there.) At the worker's exit its stacks go to `$QUEEN_BENCH_CPU_PROFILE/w<pid>.txt`,
one collapsed stack and its count a line, as py-spy writes them (bench/profile.py reads
both).
"""

from __future__ import annotations

import collections
import os
import runpy
import signal
from pathlib import Path
from types import FrameType
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
_server = runpy.run_path(str(_ROOT / "config" / "gunicorn.conf.py"))
globals().update({k: v for k, v in _server.items() if not k.startswith("__")})

INTERVAL_S = 0.001
_stacks: collections.Counter[str] = collections.Counter()


def _frame(frame: FrameType) -> str:
    code = frame.f_code
    return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"


def _sample(signum: int, frame: FrameType | None) -> None:
    parts = []
    while frame is not None:
        parts.append(_frame(frame))
        frame = frame.f_back
    _stacks[";".join(reversed(parts))] += 1


def post_fork(server: Any, worker: Any) -> None:
    _server["post_fork"](server, worker)
    signal.signal(signal.SIGPROF, _sample)
    signal.setitimer(signal.ITIMER_PROF, INTERVAL_S, INTERVAL_S)


def worker_exit(server: Any, worker: Any) -> None:
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    out = Path(os.environ["QUEEN_BENCH_CPU_PROFILE"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"w{os.getpid()}.txt").write_text(
        "".join(f"{stack} {n}\n" for stack, n in _stacks.items())
    )
    _server["worker_exit"](server, worker)
