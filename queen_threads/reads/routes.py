"""POST /api/v1/fetch and POST /api/v1/partitions/changed (docs/reads.md)."""

from __future__ import annotations

import falcon

from queen_threads.http.request import json_object, media
from queen_threads.http.routes import API, RO, Route, route
from queen_threads.reads.body import changed_body, fetch_body
from queen_threads.runtime import Runtime

FETCH_FIELDS = ("entries", "maxBytes")
CHANGED_FIELDS = ("entries",)


class Fetch:
    """Records of up to 1024 partitions by offset, with each one's high watermark."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = json_object(req, self.runtime.settings.max_body_size, known=FETCH_FIELDS)
        body = fetch_body(raw)
        media(resp, self.runtime.reads.fetch(body))


class Changed:
    """A queue's partitions written since a time, paged, with the answer's safeTime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = json_object(req, self.runtime.settings.max_body_size, known=CHANGED_FIELDS)
        body = changed_body(raw)
        media(resp, self.runtime.reads.changed(body))


def routes(runtime: Runtime) -> list[Route]:
    """They change nothing: read-only."""
    return [
        route(f"{API}/fetch", Fetch(runtime), POST=RO),
        route(f"{API}/partitions/changed", Changed(runtime), POST=RO),
    ]
