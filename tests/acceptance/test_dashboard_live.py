"""The overview's per-minute charts are live (docs/dashboard.md, "Live"): a burst of pushes
shows on the Pushed chart within 5 s, in a real browser against the real server.

The server's processes flush their analytics only once an hour here
(METRICS_FLUSH_INTERVAL_S=3600), so the flush cannot be what shows the burst: the chart
shows it from the processes' live rows (queen.metrics_live), which each writes about once
a second while it counts; checked by leaving out the live rows in the chart statement
(schema/queries/analytics.sql): the chart stayed at 0.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import Console, browser_page
from tests.support.queue_http import QueueHttp
from tests.support.server import ServerProcess

pytestmark = pytest.mark.serial  # asserts latencies: alone under xdist (docs/testing.md)

BURST = 25
WITHIN_MS = 5_000


@pytest.fixture(scope="module")
def srv(module_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(module_dsn, workers=2, METRICS_FLUSH_INTERVAL_S="3600") as server:
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


def test_a_burst_of_pushes_shows_on_the_pushed_chart_within_5_s(page: Page, api: QueueHttp) -> None:
    queue = f"live-{uuid.uuid4().hex[:8]}"
    api.push(queue, [{"n": 0}])
    page.goto(f"/?queue={queue}")
    expect(page.locator("#flow-source")).to_contain_text(f"Queue {queue}")
    chart = page.locator("#chart-pushed")
    expect(chart).to_have_attribute("data-total", "1", timeout=WITHIN_MS)
    for start in range(0, BURST, 5):  # a burst of requests, over both worker processes
        api.push(queue, [{"n": n} for n in range(start, start + 5)])
    pushed_at = time.monotonic()
    expect(chart).to_have_attribute("data-total", str(1 + BURST), timeout=WITHIN_MS)
    assert time.monotonic() - pushed_at <= WITHIN_MS / 1000
