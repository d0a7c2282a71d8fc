"""CORS_ALLOWED_ORIGINS in the request middleware: `*` by default (the original), or only
the listed origins; preflights are answered 204 either way."""

from __future__ import annotations

import falcon
import falcon.testing

from queen_threads.http.middleware import RequestContext
from queen_threads.metrics import RequestStats


class Hello:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"ok": True}


def client(*origins: str) -> falcon.testing.TestClient:
    app = falcon.App(middleware=[RequestContext(RequestStats(), origins or ("*",))])
    app.add_route("/x", Hello())
    return falcon.testing.TestClient(app)


def test_any_origin_by_default() -> None:
    r = client().simulate_get("/x", headers={"Origin": "https://anything.example"})
    assert r.headers["Access-Control-Allow-Origin"] == "*"
    assert "Vary" not in r.headers
    # what a browser may send is the preflight's answer, not every answer's
    assert "Access-Control-Allow-Headers" not in r.headers
    preflight = client().simulate_options("/x", headers={"Origin": "https://anything.example"})
    assert "Authorization" in preflight.headers["Access-Control-Allow-Headers"]
    assert preflight.headers["Access-Control-Allow-Methods"].startswith("GET")


def test_listed_origins_only() -> None:
    api = client("https://a.example", "http://localhost:3000")
    for origin in ("https://a.example", "http://localhost:3000"):
        r = api.simulate_get("/x", headers={"Origin": origin})
        assert r.headers["Access-Control-Allow-Origin"] == origin
        assert r.headers["Vary"] == "Origin"
    for headers in ({"Origin": "https://b.example"}, {}):
        r = api.simulate_get("/x", headers=headers)
        assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers


def test_preflight_is_204_without_a_route_or_a_token() -> None:
    r = client("https://a.example").simulate_options(
        "/anything", headers={"Origin": "https://a.example"}
    )
    assert r.status_code == 204
    assert r.headers["Access-Control-Allow-Origin"] == "https://a.example"
