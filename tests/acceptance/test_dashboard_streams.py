"""The dashboard's Streams page on the real server: the empty state with the command to
run, a defined stream with its window and sources, the totals, a stream's consumers once a
group polled (kept in the URL), deleting a stream from the page (confirmed first; a
read-only token is told its role cannot), no console error, and a phone without sideways
scrolling. The tests run in file order: the first sees an empty server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import PHONE, Console, browser_page
from tests.support.queue_http import QueueHttp
from tests.support.server import ServerProcess
from tests.support.tokens import SECRET, hs256

TOKEN_KEY = "queen.token"


@pytest.fixture(scope="module")
def srv(module_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(module_dsn, workers=1) as server:
        yield server


@pytest.fixture
def api(srv: ServerProcess) -> Iterator[QueueHttp]:
    client = QueueHttp(srv.url)
    yield client
    client.close()


def define(api: QueueHttp, queues: list[str], **options: object) -> str:
    for queue in queues:
        api.post("/configure", {"queue": queue, "options": {}})
    name = f"st-{uuid.uuid4().hex[:8]}"
    api.post("/stream/define", {"name": name, "source_queue_names": queues, **options})
    return name


def row(page: Page, name: str) -> object:
    return page.locator(f'#streams tr[data-key="{name}"]')


def test_the_empty_state_says_how_to_define_a_stream(chromium: Browser, srv: ServerProcess) -> None:
    with browser_page(chromium, srv.url, Console()) as page:
        page.goto("/streams")
        expect(page.locator("h1")).to_have_text("Streams")
        expect(page.locator("#streams .empty")).to_contain_text("No streams yet")
        expect(page.locator("#streams .empty pre")).to_contain_text("/api/v1/stream/define")
        expect(page.locator('#stream-stats [data-stat="Streams"] .value')).to_have_text("0")


def test_a_stream_its_consumers_and_deleting_it(
    chromium: Browser, srv: ServerProcess, api: QueueHttp
) -> None:
    counted = define(api, ["st-orders", "st-refunds"], window_type="count", window_size_count=2)
    timed = define(api, ["st-orders"], partitioned=True, window_duration_ms=300_000,
                   window_grace_period_ms=5000)  # fmt: skip
    api.push("st-orders", [{"n": 1}, {"n": 2}])
    window = api.post(
        "/stream/poll", {"streamName": counted, "consumerGroup": "billing", "timeout": 0}
    )["window"]
    assert window["key"] == "__GLOBAL__"
    with browser_page(chromium, srv.url, Console()) as page:
        page.goto("/")
        page.locator("#nav").get_by_role("link", name="Streams", exact=True).click()
        expect(page).to_have_url(f"{srv.url}/streams")
        expect(page.locator('#nav a[aria-current="page"]')).to_have_text("Streams")
        expect(row(page, counted)).to_contain_text("count 2")
        expect(row(page, counted)).to_contain_text("st-orders, st-refunds")
        expect(row(page, timed)).to_contain_text("tumbling 5 min")
        expect(row(page, timed)).to_contain_text("5 s")  # grace
        expect(row(page, timed)).to_contain_text("per partition")
        expect(page.locator('#stream-stats [data-stat="Streams"] .value')).to_have_text("2")
        expect(page.locator('#stream-stats [data-stat="Windows out"] .value')).to_have_text("1")

        row(page, counted).click()  # open it: kept in the URL
        expect(page).to_have_url(f"{srv.url}/streams?stream={counted}")
        detail = page.locator("#stream-detail")
        expect(detail.locator("h2").first).to_have_text(f"Stream {counted}")
        key = detail.locator('#stream-consumers tr[data-key="billing:__GLOBAL__"]')
        expect(key).to_contain_text("billing")
        expect(key.locator("[data-stream-key]")).to_have_text("global (__GLOBAL__)")
        expect(key).to_contain_text("2 msg")  # the window out
        page.reload()
        expect(key).to_be_visible()
        expect(page.locator(".notice.error")).to_have_count(0)

        detail.get_by_role("button", name="Delete stream").click()
        dialog = page.locator("dialog.confirm-dialog")
        expect(dialog).to_contain_text(f"Delete stream {counted}?")
        dialog.get_by_role("button", name="Cancel").click()  # nothing happens
        expect(dialog).to_have_count(0)
        expect(row(page, counted)).to_be_visible()
        detail.get_by_role("button", name="Delete stream").click()
        dialog.get_by_role("button", name="Delete").click()
        expect(row(page, counted)).to_have_count(0)
        expect(page.locator("#stream-detail")).to_have_count(0)
        expect(page).to_have_url(f"{srv.url}/streams")
        expect(row(page, timed)).to_be_visible()
    assert api.http.get(f"/resources/streams/{counted}").status_code == 404
    assert api.http.get(f"/resources/streams/{timed}").status_code == 200


def test_sdk_queries_are_listed_with_their_state_and_lag(
    chromium: Browser, srv: ServerProcess, api: QueueHttp
) -> None:
    """A query of the official clients' streaming SDK, registered and one cycle in: one
    state row, two source messages still to consume."""
    query, source = f"sdk-{uuid.uuid4().hex[:8]}", f"sdk-src-{uuid.uuid4().hex[:8]}"
    sdk = httpx.Client(base_url=f"{srv.url}/streams/v1", timeout=10)
    reg = sdk.post(
        "/queries",
        json={"name": query, "source_queue": source, "sink_queue": "sdk-sink", "config_hash": "c"},
    )
    api.push(source, [{"n": 1}, {"n": 2}, {"n": 3}])
    [msg] = api.pop(source, batch=1, consumerGroup=f"streams.{query}")
    res = sdk.post(
        "/cycle",
        json={
            "query_id": reg.json()["query_id"],
            "partition_id": msg["partitionId"],
            "consumer_group": f"streams.{query}",
            "state_ops": [{"type": "upsert", "key": "tumb:60\x1fw\x1fk", "value": {"acc": 1}}],
            "ack": {"transactionId": msg["transactionId"], "leaseId": msg["leaseId"]},
        },
    )
    assert res.status_code == 200, res.text
    with browser_page(chromium, srv.url, Console()) as page:
        page.goto("/streams")
        line = page.locator(f'#sdk-queries tr[data-key="{query}"]')
        expect(line).to_contain_text(source)
        expect(line).to_contain_text("sdk-sink")
        cells = [c.strip() for c in line.locator("td").all_inner_texts()]
        assert cells[3:7] == ["1", "1", cells[5], "2"], cells  # partitions, rows, size, lag
        assert cells[5].endswith(" B"), cells
        expect(page.locator(".notice.error")).to_have_count(0)
    sdk.close()


def test_a_phone_shows_the_streams_without_sideways_scrolling(
    chromium: Browser, srv: ServerProcess, api: QueueHttp
) -> None:
    name = define(api, ["st-phone-a", "st-phone-b"], window_type="sliding",
                  window_duration_ms=600_000, window_slide_ms=60_000)  # fmt: skip
    api.push("st-phone-a", [{"n": 1}])
    api.post("/stream/seek", {"streamName": name, "consumerGroup": "a-rather-long-group-name",
                              "timestamp": "2024-01-01T00:00:00Z"})  # fmt: skip
    with browser_page(chromium, srv.url, Console(), viewport=PHONE) as page:
        for url in ("/streams", f"/streams?stream={name}"):
            page.goto(url)
            expect(row(page, name)).to_contain_text("sliding 10 min every 1 min")
            if "?" in url:
                expect(page.locator("#stream-consumers tbody tr").first).to_contain_text(
                    "a-rather-long-group-name"
                )
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{url} is {width}px wide on a 390px phone"


@pytest.fixture(scope="module")
def jwt_srv(pg_admin_dsn: str, template_db: str) -> Iterator[ServerProcess]:
    from tests.conftest import database_from_template

    with (
        database_from_template(pg_admin_dsn, template_db) as dsn,
        ServerProcess(dsn, workers=1, JWT_ENABLED="true", JWT_SECRET=SECRET) as server,
    ):
        yield server


def test_a_read_only_token_is_told_its_role_cannot_delete(
    chromium: Browser, jwt_srv: ServerProcess
) -> None:
    admin = QueueHttp(jwt_srv.url, hs256("root", "admin"))
    try:
        name = define(admin, ["st-guarded"])
    finally:
        admin.close()
    with browser_page(chromium, jwt_srv.url, Console(allowed_statuses=(403,))) as page:
        reader = hs256("viewer", "read-only")
        page.context.add_init_script(f"sessionStorage.setItem({TOKEN_KEY!r}, {reader!r})")
        page.goto(f"/streams?stream={name}")
        page.locator("#stream-detail").get_by_role("button", name="Delete stream").click()
        page.locator("dialog.confirm-dialog").get_by_role("button", name="Delete").click()
        expect(page.locator(".toast.error")).to_contain_text("Your role cannot do this")
        expect(page.locator(".toast.error")).to_contain_text("deleting a stream")
        expect(row(page, name)).to_be_visible()
    headers = {"Authorization": f"Bearer {hs256('root', 'admin')}"}
    still = httpx.get(f"{jwt_srv.url}/api/v1/resources/streams/{name}", headers=headers)
    assert still.status_code == 200
