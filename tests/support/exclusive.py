"""Racing background services: every one tries its turn at the same moment."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from queen_threads.background.exclusive import ExclusiveService


def race_run_once(services: Sequence[ExclusiveService]) -> list[str]:
    """Start `run_once()` of every service at once (a barrier); their outcomes' statuses."""
    barrier = threading.Barrier(len(services))
    outcomes: list[str] = []

    def turn(svc: ExclusiveService) -> None:
        barrier.wait()
        outcomes.append(svc.run_once().status)

    threads = [threading.Thread(target=turn, args=(s,)) for s in services]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes
