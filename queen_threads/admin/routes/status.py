"""Status routes for dashboards (one SQL statement each, JSON built by PostgreSQL):

GET /api/v1/status?from&to&queue&namespace&task
GET /api/v1/status/queues?from&to&namespace&task&limit=100&offset=0
GET /api/v1/status/queues/{queue}?from&to            (404 when the queue does not exist)
GET /api/v1/resources/overview

Message counts are queue mode's view (pending / processing = in a live lease / completed
= consumed or dead-lettered) plus dead-letter rows of every group. The time range
[from, to) (ISO-8601; default: the last hour) selects the throughput figures, which come
from the timestamps the database keeps: messages ingested (created_at), dead-lettered
(failed_at) and removed by retention (executed_at), in minute, hour or day buckets
depending on the span.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import falcon

from queen_threads import validation as v
from queen_threads.admin.store import AdminStore
from queen_threads.errors import NotFound
from queen_threads.http.buckets import default_range
from queen_threads.http.params import PAGE, TIME_RANGE, iso_z, name_param, page, scope_filters
from queen_threads.http.request import media
from queen_threads.http.routes import API, RO, Route, route


def window(req: falcon.Request) -> dict[str, Any]:
    """[from, to) from the query string (default: the last hour) and its bucket size."""
    start, end = default_range(req)
    span = end - start
    if span <= timedelta(hours=6):
        bucket = "minute"
    elif span <= timedelta(days=7):
        bucket = "hour"
    else:
        bucket = "day"
    return {"from_ts": start, "to_ts": end, "bucket": bucket}


def time_range_json(w: dict[str, Any]) -> dict[str, str]:
    return {"from": iso_z(w["from_ts"]), "to": iso_z(w["to_ts"])}


class _Status:
    def __init__(self, store: AdminStore) -> None:
        self.store = store


class Status(_Status):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        w = window(req)
        filters = scope_filters(req)
        body = self.store.status("status_summary", {**w, **filters})
        seconds = max((w["to_ts"] - w["from_ts"]).total_seconds(), 1e-9)
        throughput = body["throughput"]
        throughput["ingestedPerSecond"] = round(throughput["ingested"] / seconds, 3)
        throughput["deadLetteredPerSecond"] = round(throughput["deadLettered"] / seconds, 3)
        media(resp, {"timeRange": time_range_json(w), "filters": filters, **body})


class StatusQueues(_Status):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        w = window(req)
        limit, offset = page(req, resp, 100)
        filters = {
            "namespace": name_param(req, "namespace", "Namespace"),
            "task": name_param(req, "task", "Task"),
        }
        body = self.store.status(
            "status_queues", {**w, **filters, "limit": limit, "offset": offset}
        )
        seconds = max((w["to_ts"] - w["from_ts"]).total_seconds(), 1e-9)
        for queue in body["queues"]:
            t = queue["throughput"]
            t["ingestedPerSecond"] = round(t["ingested"] / seconds, 3)
        media(resp, {"timeRange": time_range_json(w), "filters": filters, **body})


class StatusQueue(_Status):
    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        name = v.name(queue, "Queue")
        w = window(req)
        body = self.store.status("status_queue", {**w, "queue": name})
        if body is None:
            raise NotFound(f"Queue {name!r} not found")
        seconds = max((w["to_ts"] - w["from_ts"]).total_seconds(), 1e-9)
        t = body["totals"]["throughput"]
        t["ingestedPerSecond"] = round(t["ingested"] / seconds, 3)
        media(resp, {"timeRange": time_range_json(w), **body})


class Overview(_Status):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.store.overview())


def routes(store: AdminStore) -> list[Route]:
    return [
        route(f"{API}/status", Status(store),
              GET=(RO, TIME_RANGE | {"queue", "namespace", "task"})),
        route(f"{API}/status/queues", StatusQueues(store),
              GET=(RO, PAGE | TIME_RANGE | {"namespace", "task"})),
        route(f"{API}/status/queues/{{queue}}", StatusQueue(store), GET=(RO, TIME_RANGE)),
        route(f"{API}/resources/overview", Overview(store), GET=RO),
    ]  # fmt: skip
