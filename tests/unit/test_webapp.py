"""The dashboard's files as the app serves them: page paths, content types, caching,
conditional requests, no way out of the folder, WEBAPP_ROOT, and public under JWT."""

from __future__ import annotations

import configparser
import fnmatch
import re
from pathlib import Path

import falcon
import falcon.testing
import pytest

from queen_threads.app import create_app
from queen_threads.errors import ConfigError
from queen_threads.http.routes import Rule
from queen_threads.http.webapp import ASSETS_ROUTE, IMMUTABLE, PACKAGED_ROOT, PAGES, Webapp
from queen_threads.runtime import Runtime
from queen_threads.settings import load_settings
from tests.support.routes import table_and_app
from tests.support.tokens import SECRET

ROOT = Path(__file__).resolve().parents[2]


def make_client(folder: Path, **env: str) -> falcon.testing.TestClient:
    """The real app around a runtime that is never started (no database is touched)."""
    settings = load_settings({"FILE_BUFFER_DIR": str(folder / "buffers"), **env}, dotenv_path=None)
    return falcon.testing.TestClient(
        create_app(Runtime(settings, "postgresql://127.0.0.1:1/unused"))
    )


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> falcon.testing.TestClient:
    return make_client(tmp_path_factory.mktemp("webapp"))


def asset_prefix(client: falcon.testing.TestClient) -> str:
    found = re.search(r'src="(/assets/@[0-9a-f]{12})/js/app\.js"', client.simulate_get("/").text)
    assert found, "index.html does not load the versioned app.js"
    return found.group(1)


@pytest.mark.parametrize("path", sorted(PAGES))
def test_every_page_path_answers_the_page(client: falcon.testing.TestClient, path: str) -> None:
    r = client.simulate_get(path)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.headers["cache-control"] == "no-cache"
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "__ASSETS__" not in r.text and '<nav class="nav"' in r.text


def test_a_page_takes_its_own_url_parameters_and_names_others(
    client: falcon.testing.TestClient,
) -> None:
    ok = client.simulate_get("/dlq", query_string="queue=orders&error=timeout&offset=100")
    assert ok.status_code == 200
    r = client.simulate_get("/dlq", query_string="queu=orders")
    assert r.status_code == 200 and r.headers["Queen-Ignored-Parameters"] == "query:queu"
    assert client.simulate_get("/nowhere").status_code == 404
    assert client.simulate_get("/index.html").status_code == 404


def test_versioned_assets_are_immutable_and_the_rest_revalidated(
    client: falcon.testing.TestClient,
) -> None:
    prefix = asset_prefix(client)
    app_js = (PACKAGED_ROOT / "assets" / "js" / "app.js").read_bytes()
    versioned = client.simulate_get(f"{prefix}/js/app.js")
    assert versioned.status_code == 200
    assert versioned.content == app_js
    assert versioned.headers["content-type"] == "text/javascript; charset=utf-8"
    assert versioned.headers["cache-control"] == IMMUTABLE
    plain = client.simulate_get("/assets/js/app.js")
    assert plain.content == app_js
    assert plain.headers["cache-control"] == "no-cache"
    stale = client.simulate_get("/assets/@000000000000/js/app.js")
    assert stale.content == app_js
    assert stale.headers["cache-control"] == "no-cache"  # an old version is not pinned
    etag = plain.headers["etag"]
    again = client.simulate_get("/assets/js/app.js", headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    page_etag = client.simulate_get("/").headers["etag"]
    assert client.simulate_get("/queues", headers={"If-None-Match": page_etag}).status_code == 304


@pytest.mark.parametrize(
    ("path", "content_type"),
    [("css/app.css", "text/css; charset=utf-8"), ("img/logo.svg", "image/svg+xml"),
     ("vendor/uplot/uPlot.esm.js", "text/javascript; charset=utf-8")],
)  # fmt: skip
def test_content_types(client: falcon.testing.TestClient, path: str, content_type: str) -> None:
    r = client.simulate_get(f"/assets/{path}")
    assert r.status_code == 200, path
    assert r.headers["content-type"] == content_type


@pytest.mark.parametrize(
    "path",
    ["/assets/../../setup.cfg", "/assets/%2e%2e/%2e%2e/setup.cfg", "/assets/..%2f..%2fsetup.cfg",
     "/assets/js/../../index.html", "/assets/@abc/../../../setup.cfg", "/assets/.hidden.js",
     "/assets/js", "/assets/js/", "/assets//etc/passwd", "/assets/%00.js", "/assets/js/app.py",
     "/assets/js\\..\\..\\index.html", "/assets/C:/x.js"],
)  # fmt: skip
def test_nothing_outside_the_assets_folder_is_served(
    client: falcon.testing.TestClient, path: str
) -> None:
    r = client.simulate_get(path)
    assert r.status_code == 404, (path, r.text[:80])
    assert r.headers["content-type"].startswith("application/json")


def test_webapp_root_is_served_and_a_link_out_of_it_is_not(tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text('<p>custom</p><script src="__ASSETS__/main.js"></script>')
    (root / "assets" / "main.js").write_text("export {};")
    secret = tmp_path / "secret.js"
    secret.write_text("the password")
    (root / "assets" / "leak.js").symlink_to(secret)
    client = make_client(tmp_path, WEBAPP_ROOT=str(root))
    page = client.simulate_get("/")
    assert "<p>custom</p>" in page.text
    src = re.search(r'src="([^"]+)"', page.text)
    assert src and src.group(1).startswith("/assets/@")
    assert client.simulate_get(src.group(1)).text == "export {};"
    assert client.simulate_get("/assets/leak.js").status_code == 404


def test_a_changed_asset_changes_the_version(tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text('<script src="__ASSETS__/main.js"></script>')
    main = root / "assets" / "main.js"
    main.write_text("1")
    webapp = Webapp(root)
    before = webapp.version()
    main.write_text("22")
    webapp._version = (float("-inf"), "")  # past the one-second memo
    assert webapp.version() != before


def test_webapp_root_must_be_a_dashboard_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"invalid WEBAPP_ROOT: .* is not a dashboard folder"):
        load_settings({"WEBAPP_ROOT": str(tmp_path)}, dotenv_path=None)


def test_under_jwt_the_page_is_public_and_the_api_is_not(tmp_path: Path) -> None:
    client = make_client(tmp_path, JWT_ENABLED="true", JWT_SECRET=SECRET)
    prefix = asset_prefix(client)
    for path in (*PAGES, f"{prefix}/js/app.js", "/assets/css/app.css"):
        assert client.simulate_get(path).status_code == 200, path
    assert client.simulate_get("/api/v1/resources/queues").status_code == 401


def test_only_the_dashboard_is_public(tmp_path: Path) -> None:
    table, _ = table_and_app(tmp_path)
    access = {t: {m: row.access for m, row in ms.items()} for t, ms in table.by_path.items()}
    public = {t for t, methods in access.items() if Rule.PUBLIC in methods.values()}
    assert public == {*PAGES, ASSETS_ROUTE}
    assert all(methods == {"GET": Rule.PUBLIC} for t, methods in access.items() if t in public)


def test_the_page_router_and_the_server_know_the_same_pages() -> None:
    router = (PACKAGED_ROOT / "assets" / "js" / "router.js").read_text()
    assert set(re.findall(r'\{ path: "(/[a-z]*)"', router)) == set(PAGES)


def test_the_wheel_ships_every_dashboard_file() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    patterns = config["options.package_data"]["queen_threads"].split()
    package = ROOT / "queen_threads"
    files = [p.relative_to(package).as_posix() for p in PACKAGED_ROOT.rglob("*") if p.is_file()]
    assert len(files) > 10
    missing = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert not missing, f"not in setup.cfg package_data: {missing}"
