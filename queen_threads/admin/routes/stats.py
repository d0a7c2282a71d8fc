"""POST /api/v1/stats/refresh (admin; no body or `{}`).

The statistics this server answers (message counts, consumer-group lag, status) are
computed live from the tables, so there is nothing of ours to recompute. What can go
stale is PostgreSQL's own planner statistics after a bulk load, a large clear or a
retention sweep, until autovacuum catches up: this route ANALYZEs every queen table now
(queen.refresh_stats_v1) and answers the current totals (those of
GET /api/v1/resources/overview)."""

from __future__ import annotations

import falcon

from queen_threads.admin.body import STATS_REFRESH_FIELDS
from queen_threads.admin.store import AdminStore
from queen_threads.http.request import json_object, media


class StatsRefresh:
    def __init__(self, store: AdminStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        json_object(req, self.body_limit, allow_empty=True, known=STATS_REFRESH_FIELDS)
        analyzed = self.store.refresh_stats()
        media(resp, {"success": True, **analyzed, "totals": self.store.overview()})
