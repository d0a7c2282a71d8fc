"""The poll machinery under gevent's monkey patching, as gunicorn -k gevent runs it.

Runs in a subprocess because monkey patching must not leak into the other tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
from gevent import monkey
monkey.patch_all()

import threading, time
import gevent
from queen_threads.polling import (
    LongPollService, PollIntentionRegistry, PollWorkerPool, ResponseQueues,
)
from tests.support.polling_fakes import InMemoryPopper, make_intention
from tests.support.keys import qk

assert threading.Event.__module__.startswith("gevent"), threading.Event.__module__
registry = PollIntentionRegistry(worker_count=2)
popper = InMemoryPopper()
responses = ResponseQueues()
pool = PollWorkerPool(2, registry, popper, responses, worker_interval_ms=60_000)
pool.start()
service = LongPollService(registry, pool, responses, popper)

def consume(rid):
    now = time.monotonic()
    intention = make_intention(rid, queue="q", created_at=now, timeout_s=20)
    return service.wait_for(intention)

waiters = [gevent.spawn(consume, f"r{i}") for i in range(50)]
gevent.sleep(0)  # let every request register and park
assert registry.size() == 50, registry.size()
popper.add(qk("q:*:__QUEUE_MODE__"), 50)
pool.notify("q", "Default")
gevent.joinall(waiters, timeout=10)
statuses = sorted(w.value.status for w in waiters if w.value is not None)
assert statuses == [200] * 50, statuses

late = gevent.spawn(consume, "late")
gevent.sleep(0)
assert pool.stop(timeout=5)
assert late.get(timeout=5).status == 204
print("ok")
"""


def test_pool_and_service_under_gevent() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
