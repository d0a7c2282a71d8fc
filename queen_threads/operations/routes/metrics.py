"""GET /metrics: this worker process's live numbers as JSON.
GET /metrics/prometheus: the whole server (every worker process) in the Prometheus text
format (queen_threads/metrics/)."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Mapping

import falcon

from queen_threads.buffer import FileBuffer
from queen_threads.db.pool import Pool
from queen_threads.ephemeral import EphemeralQueues
from queen_threads.http.request import media
from queen_threads.kv import KvStore
from queen_threads.metrics.exposition import Exposition

Section = Callable[[], object]


class Metrics:
    """`sections`: the answer's parts between `uptime` and `memory`, each read when asked
    (app.py names them: requests, messages, database, longPolling, ...)."""

    def __init__(self, started_at: float, sections: Mapping[str, Section]) -> None:
        self.started_at = started_at
        self.sections = sections

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        body = {
            "uptime": round(time.time() - self.started_at, 3),
            **{name: read() for name, read in self.sections.items()},
            "memory": {"maxRssKb": usage.ru_maxrss},
            "cpu": {"user": round(usage.ru_utime, 3), "system": round(usage.ru_stime, 3)},
        }
        media(resp, body)


def kv_section(pool: Pool, kv: KvStore) -> Section:
    """Keys, expired rows (swept and waiting) and live permits of the database; this
    process's lock acquires by outcome."""

    def read() -> dict[str, object]:
        database: dict[str, object] = {"error": "database unreachable"}
        if pool.reachable is not False:  # during an outage /metrics answers at once
            try:
                database = kv.stats()
            except Exception as exc:  # nor does a failed read break it
                database = {"error": str(exc)}
        return {**database, "lockAcquires": kv.lock_counts.snapshot()}

    return read


def ephemeral_section(pool: Pool, ephemeral: EphemeralQueues) -> Section:
    """The ephemeral queues' depth, bytes, dropped and in-flight totals (one small query)
    and this process's waiting ephemeral pops."""

    def read() -> dict[str, object]:
        if pool.reachable is not False:  # during an outage /metrics answers at once
            try:
                return ephemeral.totals()
            except Exception as exc:  # nor does a failed read break it
                return {"error": str(exc), "waitingPops": ephemeral.gates.waiting()}
        return {"error": "database unreachable", "waitingPops": ephemeral.gates.waiting()}

    return read


def buffer_section(buffer: FileBuffer) -> Section:
    keys = ("pending", "failed", "dbHealthy", "maintenanceMode", "popMaintenanceMode",
            "bufferedByWorker", "replayedByWorker", "replayer")  # fmt: skip

    def read() -> dict[str, object]:
        try:
            status = buffer.status()
        except Exception as exc:  # a missing or unreadable folder must not break /metrics
            return {"error": str(exc)}
        return {k: status.get(k) for k in keys}

    return read


class PrometheusMetrics:
    """Every counter, histogram and gauge of the server, merged over its worker processes."""

    def __init__(self, exposition: Exposition) -> None:
        self.exposition = exposition

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        data, content_type = self.exposition.render(req.get_header("Accept"))
        resp.status = 200
        resp.content_type = content_type
        resp.data = data
