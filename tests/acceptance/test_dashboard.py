"""The dashboard in a real browser (Debian's Chromium) against the real server and
PostgreSQL: what an operator sees and does on each page.

The server flushes its analytics every second (METRICS_FLUSH_INTERVAL_S=1; a server
without the analytics routes ignores it and the overview's pushed chart reads
GET /api/v1/status), so a burst must show on the overview's chart within 10 s.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import Console, browser_page
from tests.support.queue_http import QueueHttp
from tests.support.server import ServerProcess

BURST = 25


@pytest.fixture(scope="module")
def srv(module_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(module_dsn, workers=2, METRICS_FLUSH_INTERVAL_S="1") as server:
        yield server


@pytest.fixture
def api(srv: ServerProcess) -> Iterator[QueueHttp]:
    client = QueueHttp(srv.url)
    yield client
    client.close()


@pytest.fixture
def page(chromium: Browser, srv: ServerProcess) -> Iterator[Page]:
    with browser_page(chromium, srv.url, Console()) as p:
        yield p


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_overview_shows_a_pushed_queue_and_its_chart_moves(page: Page, api: QueueHttp) -> None:
    queue = name("overview")
    api.push(queue, [{"n": i} for i in range(7)])
    page.goto(f"/?queue={queue}")
    row = page.locator(f'#backlog tr[data-key="{queue}"]')
    expect(row.locator("td").nth(1)).to_have_text("7")
    expect(page.locator("#flow-source")).to_contain_text(f"Queue {queue}")
    chart = page.locator("#chart-pushed")
    expect(chart).to_have_attribute("data-total", "7")  # what the chart shows before the burst
    api.push(queue, [{"burst": i} for i in range(BURST)])
    expect(chart).to_have_attribute("data-total", str(7 + BURST), timeout=10_000)
    expect(row.locator("td").nth(1)).to_have_text(str(7 + BURST))
    expect(page.locator('.stat[data-stat="Waiting"] .value')).to_have_text(re.compile(r"^\d"))


def test_a_message_is_found_opened_and_deleted(page: Page, api: QueueHttp) -> None:
    queue = name("browse")
    pushed = api.push(queue, [{"order": 1}, {"order": 2, "note": "find me"}, {"order": 3}], "eu")
    wanted = pushed[1]
    page.goto("/messages")
    page.locator('select[name="queue"]').select_option(queue)
    page.locator('select[name="status"]').select_option("pending")
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(3)
    rows.filter(has_text=wanted["transactionId"]).click()
    detail = page.locator("#message-detail")
    expect(detail).to_contain_text('"note": "find me"')
    expect(detail).to_contain_text(wanted["transactionId"])
    expect(detail.locator(".badge", has_text="pending").first).to_be_visible()
    assert f"transactionId={wanted['transactionId']}" in page.url
    page.reload()  # the URL is a bookmark of the open message
    expect(page.locator("#message-detail")).to_contain_text('"note": "find me"')
    page.locator("#message-detail").get_by_role("button", name="Delete").click()
    page.locator("dialog").get_by_role("button", name="Delete").click()
    expect(page.locator("#message-detail")).to_have_count(0)
    expect(page.locator("#messages tbody tr")).to_have_count(2)
    r = api.http.get(f"/messages/{wanted['partition_id']}/{wanted['transactionId']}")
    assert r.status_code == 404


def test_a_dead_letter_is_requeued_from_the_page_and_reaches_a_consumer(
    page: Page, api: QueueHttp
) -> None:
    queue = name("dlq-one")
    [failed] = api.dead_letter(queue, 1, "card declined")
    page.goto(f"/dlq?queue={queue}")
    row = page.locator("#dlq tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("card declined")
    row.get_by_role("button", name="Requeue").click()
    expect(page.locator("#dlq tbody tr")).to_have_count(0)
    expect(page.locator("#dlq")).to_contain_text("No dead letter matches these filters")
    [again] = api.pop(queue)
    assert again["data"] == failed["data"]
    assert again["transactionId"].startswith(f"{failed['transactionId']}:retry:")
    assert api.get("/dlq", queue=queue)["total"] == 0


def test_dead_letters_are_requeued_in_bulk_after_a_dry_run(page: Page, api: QueueHttp) -> None:
    queue = name("dlq-many")
    api.dead_letter(queue, 3, "upstream timeout")
    api.push(f"{queue}-other", [{"x": 1}])
    page.goto(f"/dlq?queue={queue}&error=timeout")
    expect(page.locator("#dlq tbody tr")).to_have_count(3)
    page.get_by_role("button", name="Requeue all matching…").click()
    dialog = page.locator("dialog")
    expect(dialog).to_contain_text("3 message(s) in 1 partition(s) match")
    assert api.get("/dlq", queue=queue)["total"] == 3  # the dry run changed nothing
    dialog.get_by_role("button", name="Requeue 3").click()
    expect(page.locator("#dlq tbody tr")).to_have_count(0)
    assert api.get("/dlq", queue=queue)["total"] == 0
    assert len(api.pop(queue, batch=10)) == 3


def test_a_consumer_group_is_seeked_to_the_end(page: Page, api: QueueHttp) -> None:
    queue, group = name("seek"), name("billing")
    api.push(queue, [{"n": i} for i in range(4)])
    [first] = api.pop(queue, consumerGroup=group)
    api.ack(first, consumerGroup=group)
    page.goto("/groups")
    page.locator("#groups tbody tr", has_text=group).click()
    card = page.locator(f'#group-detail section[data-queue="{queue}"]')
    expect(card.locator(".panel-head h2")).to_have_text(f"{queue}: lag 3")
    assert f"group={group}" in page.url
    card.get_by_role("button", name="Seek to end").click()
    page.locator("dialog").get_by_role("button", name="Seek to end").click()
    expect(card.locator(".panel-head h2")).to_have_text(f"{queue}: lag 0")
    assert api.get(f"/consumer-groups/{group}")["totalLag"] == 0
    assert api.pop(queue, consumerGroup=group) == []


def test_a_consumer_group_is_seeked_back_to_a_time(page: Page, api: QueueHttp) -> None:
    queue, group = name("rewind"), name("audit")
    api.push(queue, [{"n": i} for i in range(2)])
    for message in api.pop(queue, batch=2, consumerGroup=group):
        api.ack(message, consumerGroup=group)
    page.goto(f"/groups?group={group}")
    card = page.locator(f'#group-detail section[data-queue="{queue}"]')
    expect(card.locator(".panel-head h2")).to_have_text(f"{queue}: lag 0")
    card.locator('input[name="seek-time"]').fill("2000-01-01T00:00")
    card.get_by_role("button", name="Seek to time").click()
    expect(card.locator(".panel-head h2")).to_have_text(f"{queue}: lag 2")


def test_the_queue_detail_shows_partitions_options_and_group_lag(
    page: Page, api: QueueHttp
) -> None:
    queue, group = name("detail"), name("reader")
    api.post(
        "/configure", {"queue": queue, "options": {"retryLimit": 5, "retryStrategy": "exponential"}}
    )
    api.push(queue, [{"n": 1}, {"n": 2}], "eu")
    api.push(queue, [{"n": 3}], "us")
    api.pop(queue, consumerGroup=group)
    page.goto("/queues")
    page.locator('input[type="search"]').fill(queue)
    expect(page.locator("#queues tbody tr")).to_have_count(1)
    page.locator("#queues tbody tr").click()
    detail = page.locator("#queue-detail")
    partitions = detail.locator("#partitions tbody tr")
    expect(partitions).to_have_count(3)  # eu, us and Default (made by /configure)
    expect(partitions.filter(has_text="eu").locator("td").nth(1)).to_have_text("2")
    expect(detail).to_contain_text("exponential")
    expect(detail.locator(f'tr[data-key="{group}"] td').nth(1)).to_have_text("3")  # its lag
    assert re.search(rf"[?&]queue={queue}", page.url)


def test_numbers_refresh_by_themselves_and_not_while_the_tab_is_hidden(
    page: Page, api: QueueHttp
) -> None:
    queue = name("live")
    api.push(queue, [{"n": 0}])
    listings: list[str] = []
    page.on("request", lambda r: listings.append(r.url) if "/status/queues?" in r.url else None)
    page.clock.install()
    page.goto(f"/queues?q={queue}")
    depth = page.locator(f'#queues tr[data-key="{queue}"] td').nth(2)
    expect(depth).to_have_text("1")
    api.push(queue, [{"n": 1}, {"n": 2}])
    page.clock.run_for(5_000)  # one refresh period, no reload
    expect(depth).to_have_text("3")
    hide = "v => { Object.defineProperty(document, 'hidden', {value: v, configurable: true});" \
           " document.dispatchEvent(new Event('visibilitychange')); }"  # fmt: skip
    page.evaluate(hide, True)
    seen = len(listings)
    page.clock.run_for(60_000)  # a minute hidden: twelve periods, no request
    api.push(queue, [{"n": 3}])
    page.evaluate(hide, False)  # shown again: refreshed at once
    expect(depth).to_have_text("4")
    assert len(listings) == seen + 1, listings[seen:]
