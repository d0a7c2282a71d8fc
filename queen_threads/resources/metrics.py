"""GET /metrics: this worker process's live numbers as JSON."""

from __future__ import annotations

import resource
import time

import falcon

from queen_threads.http.request import media
from queen_threads.runtime import Runtime


class Metrics:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rt = self.runtime
        usage = resource.getrusage(resource.RUSAGE_SELF)
        body = {
            "uptime": round(time.time() - rt.started_at, 3),
            "worker": {"pid": rt.worker_id},
            "requests": rt.stats.snapshot(),
            "database": rt.db.pool.stats(),
            "longPolling": rt.polling.stats(),
            "wakeupListener": {
                "connected": rt.listener.connected.is_set(),
                "received": rt.listener.received,
                "reconnects": rt.listener.reconnects,
            },
            "peers": rt.peers.stats(),
            "memory": {"maxRssKb": usage.ru_maxrss},
            "cpu": {"user": round(usage.ru_utime, 3), "system": round(usage.ru_stime, 3)},
        }
        media(resp, body)
