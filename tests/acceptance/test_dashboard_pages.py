"""Every page of the dashboard, reached from the navigation bar and reloaded from its URL,
without a console error; every tab of the bar whole and clickable at 1280 px, on a tablet
and on a phone; empty states that say what to do; readable on a phone; and a screenshot of
each page (light at 1280x800, one phone-width, one dark).

The screenshots go to a temporary folder, or to QUEEN_SCREENSHOTS_DIR (`scripts/screenshots`
sets it to docs/images). The tests run in file order: the first sees an empty server.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import DESKTOP, PHONE, Console, browser_page, shown_whole
from tests.support.queue_http import QueueHttp
from tests.support.server import ServerProcess

# Views worth a picture: (file name, URL, what shows once the view has its data).
SHOTS = [
    ("overview", "/?range=15m", "#chart-pushed[data-state=ready]"),
    ("queues", "/queues", "#queues tbody tr"),
    ("messages", "/messages?queue=orders&status=completed", "#messages tbody tr"),
    ("dlq", "/dlq", "#dlq tbody tr"),
    ("groups", "/groups?group=analytics", "#group-detail tbody tr"),
    ("streams", "/streams?stream=invoice-batches", "#stream-consumers tbody tr"),
    ("timers", "/timers?queue=orders", "#timer-list tbody tr"),
    ("traces", "/traces?name=order-1009", "#by-name tbody tr"),
    ("system", "/system", "#process dl"),
]

# path, heading, what shows once the page has its data
PAGES = [
    ("/", "Overview", "#backlog tbody tr"),
    ("/queues", "Queues", "#queues tbody tr"),
    ("/messages", "Messages", "#messages tbody tr"),
    ("/dlq", "Dead letters", "#dlq tbody tr"),
    ("/groups", "Consumer groups", "#groups tbody tr"),
    ("/streams", "Streams", "#streams tbody tr"),
    ("/timers", "Timers", "#timer-queues tbody tr"),
    ("/ephemeral", "Ephemeral", "#ephemeral-queues tbody tr"),
    ("/traces", "Traces", "#trace-names li"),
    ("/system", "System", "#process dl"),
]


@pytest.fixture(scope="module")
def srv(module_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(module_dsn, workers=2, METRICS_FLUSH_INTERVAL_S="1") as server:
        yield server


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("QUEEN_SCREENSHOTS_DIR")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def seeded(srv: ServerProcess) -> None:
    """A small shop: orders in three partitions with a lagging group and dead letters,
    invoices, e-mails, traces, and two streams (one with a batch acked, one out)."""
    api = QueueHttp(srv.url)
    options = {"retryLimit": 3, "retryStrategy": "exponential", "retryDelay": 1000, "leaseTime": 60}
    api.post("/configure", {"queue": "orders", "options": options})
    for partition, count in (("eu", 60), ("us", 45), ("asia", 20)):
        api.push("orders", [{"order": f"{partition}-{i}", "amount": 10 + i} for i in range(count)],
                 partition)  # fmt: skip
    for message in api.pop("orders", batch=40, consumerGroup="fulfilment"):
        api.ack(message, consumerGroup="fulfilment")
    for message in api.pop("orders", batch=5, consumerGroup="analytics"):
        api.ack(message, consumerGroup="analytics")
    delivered = api.pop("orders", batch=30)
    # one outcome per message, committed in one request (a nack ends the batch's lease, so
    # a consumer that nacks reports the rest of its outcomes with it)
    declined = {"status": "failed", "error": "card declined", "errorType": "payment",
                "retryable": False}  # fmt: skip
    timeout = {"status": "failed", "error": "upstream timeout (payments:443)", "retryable": False}
    outcomes = [declined if i < 6 else timeout if i < 9 else {"status": "completed"}
                for i in range(len(delivered))]  # fmt: skip
    acked = api.post("/ack/batch", {"acknowledgments": [
        {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
         "leaseId": m["leaseId"], **outcome} for m, outcome in zip(delivered, outcomes, strict=True)
    ]})  # fmt: skip
    assert all(r["success"] for r in acked), acked
    for i, message in enumerate(delivered):
        api.post("/traces", {"transactionId": message["transactionId"],
                             "partitionId": message["partitionId"],
                             "traceNames": [f"order-{1000 + i}"], "eventType": "processing",
                             "data": {"step": "charged" if i >= 9 else "declined"}})  # fmt: skip
    api.push("billing.invoices", [{"invoice": i} for i in range(12)])
    api.push("emails", [{"to": f"user{i}@example.com"} for i in range(30)], "welcome")
    api.pop("emails", batch=10)  # in flight
    api.post("/stream/define", {"name": "orders-per-minute", "source_queue_names": ["orders"],
                                 "partitioned": True, "window_duration_ms": 60000,
                                 "window_grace_period_ms": 5000})  # fmt: skip
    api.post("/stream/define", {"name": "invoice-batches", "window_type": "count",
                                 "window_size_count": 5,
                                 "source_queue_names": ["billing.invoices"]})  # fmt: skip
    poll = {"streamName": "invoice-batches", "consumerGroup": "accounting", "timeout": 0}
    api.post("/stream/ack", {"leaseId": api.post("/stream/poll", poll)["window"]["leaseId"]})
    api.post("/stream/poll", poll)  # the second batch stays out
    payload = base64.b64encode(orjson.dumps({"reminder": "unpaid"})).decode()
    api.post("/timers", {"operations": [
        {"op": "schedule", "queue": "orders", "timerKey": f"order:eu-{i}:expire",
         "payload": payload, "delayMs": 600_000 * (i + 1)} for i in range(3)]})  # fmt: skip
    api.post("/ephemeral/configure", {"queue": "presence", "options": {"maxLength": 100}})
    api.post("/ephemeral/push", {"queue": "presence", "messages": [{"payload": {"user": "a"}}]})
    api.close()


def test_empty_states_say_what_to_do(chromium: Browser, srv: ServerProcess) -> None:
    with browser_page(chromium, srv.url, Console()) as page:
        page.goto("/queues")
        expect(page.locator("#queues .empty")).to_contain_text("No queues yet")
        expect(page.locator("#queues .empty pre")).to_contain_text("/api/v1/push")
        page.goto("/dlq")
        expect(page.locator("#dlq .empty")).to_contain_text("The dead-letter queue is empty")
        page.goto("/groups")
        expect(page.locator("#groups .empty")).to_contain_text("pops with a consumerGroup")
        page.goto("/traces")
        expect(page.locator("#trace-names .empty")).to_contain_text("No traces yet")


def wait_for_data(page: Page, heading: str, ready: str) -> None:
    expect(page.locator("h1")).to_have_text(heading)
    expect(page.locator(ready).first).to_be_visible()
    expect(page.locator(".notice.error")).to_have_count(0)


def test_every_page_from_the_nav_bar_and_from_its_url(
    chromium: Browser, srv: ServerProcess, seeded: None
) -> None:
    with browser_page(chromium, srv.url, Console()) as page:
        page.goto("/")
        for path, heading, ready in PAGES:
            page.locator("#nav").get_by_role("link", name=heading, exact=True).click()
            expect(page).to_have_url(f"{srv.url}{path}")
            expect(page.locator('#nav a[aria-current="page"]')).to_have_text(heading)
            wait_for_data(page, heading, ready)
            page.reload()
            wait_for_data(page, heading, ready)
        page.go_back()  # history works between pages
        expect(page.locator("h1")).to_have_text("Traces")


TABLET = {"width": 1024, "height": 768}


@pytest.mark.parametrize(
    "viewport", [DESKTOP, TABLET, PHONE], ids=["1280x800", "1024x768", "390x844"]
)
def test_every_tab_of_the_navigation_is_shown_whole_and_clickable(
    chromium: Browser, srv: ServerProcess, seeded: None, tmp_path: Path, viewport: dict[str, int]
) -> None:
    """At 1280 px, on a tablet and on a phone each page's tab is shown whole (no tab cut
    off at the edge, as "System" once was at 1280 px), or behind a visible menu button
    that shows it whole; a click where it is drawn (no scrolling first) opens the page."""
    size = f"{viewport['width']}x{viewport['height']}"
    with browser_page(chromium, srv.url, Console(), viewport=viewport) as page:
        page.goto("/")
        wait_for_data(page, "Overview", "#backlog tbody tr")
        page.screenshot(path=tmp_path / f"nav-{size}.png")
        toggle = page.locator("#nav-toggle")
        for path, heading, ready in PAGES:
            link = page.locator("#nav").get_by_role("link", name=heading, exact=True)
            behind_menu = not link.is_visible()
            if behind_menu:  # then a visible button opens the menu
                expect(toggle).to_be_visible()
                expect(toggle).to_have_attribute("aria-expanded", "false")
                toggle.click()
                expect(toggle).to_have_attribute("aria-expanded", "true")
                page.screenshot(path=tmp_path / f"nav-{size}-open.png")
            problem = shown_whole(link)
            assert problem is None, f"at {size} the tab {heading!r} is {problem}"
            box = link.bounding_box()
            assert box is not None
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            expect(page).to_have_url(f"{srv.url}{path}")
            wait_for_data(page, heading, ready)
            expect(page.locator('#nav a[aria-current="page"]')).to_have_text(heading)
            if behind_menu:  # the menu closes once a page is picked
                expect(toggle).to_have_attribute("aria-expanded", "false")
                expect(link).to_be_hidden()


def test_a_picture_of_each_page(
    chromium: Browser, srv: ServerProcess, seeded: None, shots: Path
) -> None:
    with browser_page(chromium, srv.url, Console()) as page:
        for name, url, ready in SHOTS:
            page.goto(url)
            expect(page.locator(ready).first).to_be_visible()
            if name == "messages":  # open one
                page.locator("#messages tbody tr").first.click()
                expect(page.locator("#message-detail .timeline li").first).to_be_visible()
            expect(page.locator(".notice.error")).to_have_count(0)
            page.screenshot(path=shots / f"dashboard-{name}.png")


def test_a_phone_shows_the_pages_without_sideways_scrolling(
    chromium: Browser, srv: ServerProcess, seeded: None, shots: Path
) -> None:
    with browser_page(chromium, srv.url, Console(), viewport=PHONE) as page:
        for path, heading, ready in PAGES:
            page.goto(path)
            wait_for_data(page, heading, ready)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{path} is {width}px wide on a 390px phone"
        page.goto("/")
        wait_for_data(page, "Overview", "#backlog tbody tr")
        page.screenshot(path=shots / "dashboard-phone.png", full_page=True)


def test_dark_theme_by_the_system_and_by_the_toggle(
    chromium: Browser, srv: ServerProcess, seeded: None, shots: Path
) -> None:
    background = "getComputedStyle(document.body).backgroundColor"
    with browser_page(chromium, srv.url, Console(), color_scheme="dark") as page:
        page.goto("/queues?queue=orders")
        wait_for_data(page, "Queues", "#queue-detail #partitions tbody tr")
        assert page.evaluate(background) == "rgb(17, 18, 20)"
        page.screenshot(path=shots / "dashboard-dark.png")
    with browser_page(chromium, srv.url, Console(), color_scheme="light") as page:
        page.goto("/")
        assert page.evaluate(background) == "rgb(246, 247, 249)"
        toggle = page.locator('#tools button[title^="Theme"]')
        toggle.click()  # auto -> light
        toggle.click()  # light -> dark
        expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        assert page.evaluate(background) == "rgb(17, 18, 20)"
        page.reload()  # remembered
        expect(page.locator("html")).to_have_attribute("data-theme", "dark")
