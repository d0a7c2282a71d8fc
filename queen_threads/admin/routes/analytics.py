"""The dashboard's chart routes (docs/api-admin.md, "Analytics"), read-only:

GET /api/v1/status/analytics?from&to&queue&namespace&task&interval
GET /api/v1/status/queues/{queue}/messages?limit=50&offset=0
GET /api/v1/analytics/queue-ops|queue-lag|queue-parked-replicas|retention?from&to&queue&interval
GET /api/v1/analytics/system-metrics|worker-metrics?from&to&hostname&workerId&interval
GET /api/v1/analytics/postgres-stats

Each responder: the window (http/buckets.py), one AnalyticsStore call, the answer framed
as {from, to, interval, intervalSeconds, ..., series, totals}.
"""

from __future__ import annotations

from typing import Any

import falcon

from queen_threads import validation as v
from queen_threads.admin.analytics_store import AnalyticsStore
from queen_threads.admin.store import AdminStore
from queen_threads.errors import NotFound
from queen_threads.http.buckets import window
from queen_threads.http.params import CHART, PAGE, name_param, page, scope_filters
from queen_threads.http.request import media, str_param
from queen_threads.http.routes import API, RO, Route, route

FLOW = ("pushed", "popped", "acked", "failed", "dlq", "longPollWaits")
LEVELS = ("depth", "lagSeconds", "groupLagSeconds")
PEAKS = ("maxDepth", "maxLagSeconds", "maxGroupLagSeconds")
MAX_LABEL = 255
PARKED_NOTE = "this server keeps no replicas: nothing is ever parked"


def _pick(points: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"t": p["t"], **{k: p[k] for k in keys}} for p in points]


class _Chart:
    def __init__(self, store: AnalyticsStore) -> None:
        self.store = store


class StatusAnalytics(_Chart):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        w = window(req)
        filters = scope_filters(req)
        body = self.store.queue_series(w.params(), **filters)
        media(resp, {**w.frame(), "filters": filters, **body})


class QueueOps(_Chart):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        w, queue = window(req), name_param(req, "queue", "Queue")
        body = self.store.queue_series(w.params(), queue)
        totals = {k: body["totals"][k] for k in FLOW}
        media(resp, {**w.frame(), "queue": queue, "series": _pick(body["series"], FLOW),
                     "totals": totals})  # fmt: skip


class QueueLag(_Chart):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        w, queue = window(req), name_param(req, "queue", "Queue")
        body = self.store.queue_series(w.params(), queue)
        totals = {k: body["totals"][k] for k in PEAKS}
        latest = self.store.queue_latest(w.params(), queue)
        media(resp, {**w.frame(), "queue": queue, "series": _pick(body["series"], LEVELS),
                     "totals": totals, "queues": latest})  # fmt: skip


class Retention(_Chart):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        w, queue = window(req), name_param(req, "queue", "Queue")
        media(resp, {**w.frame(), "queue": queue, **self.store.retention_series(w.params(), queue)})


class ParkedReplicas:
    """Nothing is parked in this design (one PostgreSQL, no replicas): the frame only."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        w, queue = window(req), name_param(req, "queue", "Queue")
        media(resp, {**w.frame(), "queue": queue, "series": [], "totals": {"parked": 0},
                     "note": PARKED_NOTE})  # fmt: skip


def _process_filters(req: falcon.Request) -> dict[str, str | None]:
    """hostname and workerId: any text up to 255 characters (bind parameters, exact match)."""
    return {
        key: v.optional_str(str_param(req, key), key, MAX_LABEL) for key in ("hostname", "workerId")
    }


class SystemMetrics(_Chart):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        w, f = window(req), _process_filters(req)
        body = self.store.process_series(w.params(), f["hostname"], f["workerId"], False)
        media(resp, {**w.frame(), "filters": f, "series": body["series"],
                     "totals": body["totals"]})  # fmt: skip


class WorkerMetrics(_Chart):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        w, f = window(req), _process_filters(req)
        body = self.store.process_series(w.params(), f["hostname"], f["workerId"], True)
        media(resp, {**w.frame(), "filters": f, "workers": body["workers"]})


class PostgresStats(_Chart):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.store.postgres_stats())


class QueueMessages:
    """The queue page's message list: GET /messages narrowed to one queue, 404 if unknown."""

    def __init__(self, admin: AdminStore, store: AnalyticsStore) -> None:
        self.admin = admin
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        name = v.name(queue, "Queue")
        limit, offset = page(req, resp, 50)
        body = self.admin.messages(
            queue=name, partition=None, namespace=None, task=None, status=None,
            from_ts=None, to_ts=None, limit=limit, offset=offset,
        )  # fmt: skip
        if body["total"] == 0 and not self.store.queue_exists(name):
            raise NotFound(f"Queue {name!r} not found")
        media(resp, {"queue": name, **body})


def routes(store: AnalyticsStore, admin: AdminStore) -> list[Route]:
    """The dashboard's charts."""
    queue = CHART | {"queue"}
    process = CHART | {"hostname", "workerId"}
    return [
        route(f"{API}/status/analytics", StatusAnalytics(store),
              GET=(RO, CHART | {"queue", "namespace", "task"})),
        route(f"{API}/status/queues/{{queue}}/messages", QueueMessages(admin, store),
              GET=(RO, PAGE)),
        route(f"{API}/analytics/queue-ops", QueueOps(store), GET=(RO, queue)),
        route(f"{API}/analytics/queue-lag", QueueLag(store), GET=(RO, queue)),
        route(f"{API}/analytics/queue-parked-replicas", ParkedReplicas(), GET=(RO, queue)),
        route(f"{API}/analytics/retention", Retention(store), GET=(RO, queue)),
        route(f"{API}/analytics/system-metrics", SystemMetrics(store), GET=(RO, process)),
        route(f"{API}/analytics/worker-metrics", WorkerMetrics(store), GET=(RO, process)),
        route(f"{API}/analytics/postgres-stats", PostgresStats(store), GET=RO),
    ]  # fmt: skip
