"""The dashboard: `index.html` at every page path (`/`, `/queues`, ... : http/webapp.py
PAGES) and its files at `/assets/...`, from queen_threads/webapp/ or WEBAPP_ROOT.

Both are public (Rule.PUBLIC in their rows): they hold no data, and the page asks for a
token itself when an API call answers 401. Conditional GETs (`If-None-Match`) get 304.
"""

from __future__ import annotations

from pathlib import Path

import falcon

from queen_threads.errors import NotFound
from queen_threads.http.routes import PUBLIC, Route, route
from queen_threads.http.webapp import (
    ASSETS_ROUTE,
    PACKAGED_ROOT,
    PAGE_HEADERS,
    PAGES,
    StaticFile,
    Webapp,
)
from queen_threads.settings import Settings


def _matches(req: falcon.Request, etag: str) -> bool:
    header = req.get_header("If-None-Match")
    if not header:
        return False
    tags = {t.strip().removeprefix("W/").strip('"') for t in header.split(",")}
    return etag in tags or "*" in tags


def reply(req: falcon.Request, resp: falcon.Response, file: StaticFile) -> None:
    resp.set_header("Cache-Control", file.cache_control)
    resp.set_header("ETag", f'"{file.etag}"')
    resp.set_header("X-Content-Type-Options", "nosniff")
    if _matches(req, file.etag):
        resp.status = 304
        return
    resp.status = 200
    resp.content_type = file.content_type
    resp.data = file.body


class Page:
    def __init__(self, webapp: Webapp) -> None:
        self.webapp = webapp

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_headers(PAGE_HEADERS)
        reply(req, resp, self.webapp.index())


class Asset:
    def __init__(self, webapp: Webapp) -> None:
        self.webapp = webapp

    def on_get(self, req: falcon.Request, resp: falcon.Response, path: str) -> None:
        file = self.webapp.asset(path)
        if file is None:
            raise NotFound(f"Not found: GET {req.path}")
        reply(req, resp, file)


def routes(settings: Settings) -> list[Route]:
    """Public: a page's URL carries its filters and selection."""
    webapp = Webapp(Path(settings.webapp_root) if settings.webapp_root else PACKAGED_ROOT)
    page = Page(webapp)
    return [
        *(route(path, page, GET=(PUBLIC, params)) for path, params in PAGES.items()),
        route(ASSETS_ROUTE, Asset(webapp), GET=PUBLIC),
    ]
