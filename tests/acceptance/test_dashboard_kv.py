"""The System page of the dashboard shows the key/value and lock numbers of /metrics."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from tests.support.browser import Console, browser_page
from tests.support.kv_http import KvHttp, acquire, put
from tests.support.server import ServerProcess


def test_the_system_page_shows_keys_and_permits(chromium: Browser, module_dsn: str) -> None:
    with ServerProcess(module_dsn, workers=1) as srv:
        kv = KvHttp(srv.url, module_dsn)
        kv.kv(put("shop", "a", 1), put("shop", "b", 2))
        assert kv.lock(acquire("nightly", "me"))["acquired"]
        assert not kv.lock(acquire("nightly", "you"))["acquired"]
        kv.close()
        with browser_page(chromium, srv.url, Console()) as page:
            page.goto("/system")
            process = page.locator("#process dl")
            expect(process).to_contain_text("Key/value")
            expect(process).to_contain_text("3 live keys")  # the permit is a key too
            expect(process).to_contain_text("1 permits held")
            expect(process).to_contain_text("1 granted")
            expect(process).to_contain_text("1 refused")
