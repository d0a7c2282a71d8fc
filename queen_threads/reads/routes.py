"""POST /api/v1/fetch and POST /api/v1/partitions/changed (docs/reads.md)."""

from __future__ import annotations

import falcon

from queen_threads.http.request import json_object, media
from queen_threads.http.routes import API, RO, Route, route
from queen_threads.reads.body import CHANGED_FIELDS, FETCH_FIELDS, changed_body, fetch_body
from queen_threads.reads.store import ReadStore


class _Route:
    def __init__(self, store: ReadStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit


class Fetch(_Route):
    """Records of up to 1024 partitions by offset, with each one's high watermark."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = json_object(req, self.body_limit, known=FETCH_FIELDS)
        media(resp, self.store.fetch(fetch_body(raw)))


class Changed(_Route):
    """A queue's partitions written since a time, paged, with the answer's safeTime."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = json_object(req, self.body_limit, known=CHANGED_FIELDS)
        media(resp, self.store.changed(changed_body(raw)))


def routes(store: ReadStore, body_limit: int) -> list[Route]:
    """They change nothing: read-only."""
    return [
        route(f"{API}/fetch", Fetch(store, body_limit), POST=RO),
        route(f"{API}/partitions/changed", Changed(store, body_limit), POST=RO),
    ]
