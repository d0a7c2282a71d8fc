"""GET /metrics: this worker process's live numbers as JSON.
GET /metrics/prometheus: the whole server (every worker process) in the Prometheus text
format (queen_threads/metrics/)."""

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
            "ignoredParameters": rt.ignored.stats(),
            "messages": rt.instruments.counters.messages_snapshot(),
            "database": {**rt.db.pool.stats(), "queries": rt.instruments.counters.db_snapshot()},
            "longPolling": rt.polling.stats(),
            "streamPolling": rt.streams.stats(),
            "timers": rt.timers.stats(),
            "wakeupListener": rt.listener.stats(),
            "peers": rt.peers.stats(),
            "auth": rt.auth.stats(),
            "buffer": _buffer(rt),
            "background": {
                **rt.operations.stats(),
                "metrics": rt.metrics_service.stats(),
                "kvSweep": rt.kv_sweeper.stats(),
            },
            "kv": _kv(rt),
            "analytics": rt.collector.stats(),
            "memory": {"maxRssKb": usage.ru_maxrss},
            "cpu": {"user": round(usage.ru_utime, 3), "system": round(usage.ru_stime, 3)},
        }
        media(resp, body)


def _kv(rt: Runtime) -> dict[str, object]:
    """Keys, expired rows (swept and waiting) and live permits of the database; this
    process's lock acquires by outcome."""
    database: dict[str, object] = {"error": "database unreachable"}
    if rt.db.pool.reachable is not False:  # during an outage /metrics answers at once
        try:
            database = rt.kv.stats()
        except Exception as exc:  # nor does a failed read break it
            database = {"error": str(exc)}
    return {**database, "lockAcquires": rt.kv.lock_counts.snapshot()}


def _buffer(rt: Runtime) -> dict[str, object]:
    try:
        status = rt.buffer.status()
    except Exception as exc:  # a missing or unreadable folder must not break /metrics
        return {"error": str(exc)}
    keys = ("pending", "failed", "dbHealthy", "maintenanceMode", "popMaintenanceMode",
            "bufferedByWorker", "replayedByWorker", "replayer")  # fmt: skip
    return {k: status.get(k) for k in keys}


class PrometheusMetrics:
    """Every counter, histogram and gauge of the server, merged over its worker processes."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        exposition = self.runtime.instruments.exposition
        assert exposition is not None
        data, content_type = exposition.render(req.get_header("Accept"))
        resp.status = 200
        resp.content_type = content_type
        resp.data = data
