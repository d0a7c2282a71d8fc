"""The dashboard on a server with JWT_ENABLED (HS256): the page loads without a token, asks
for one when the API answers 401, keeps it for the tab only, and shows a 403 as "your role
cannot do this"; maintenance mode is switched by an admin and refused to a read-only
token; signed in, the navigation bar still shows every tab whole on one row at 1280 px."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import Console, browser_page, shown_whole
from tests.support.queue_http import QueueHttp
from tests.support.server import ServerProcess
from tests.support.tokens import SECRET, hs256

TOKEN_KEY = "queen.token"


@pytest.fixture(scope="module")
def srv(module_dsn: str) -> Iterator[ServerProcess]:
    with ServerProcess(module_dsn, workers=1, JWT_ENABLED="true", JWT_SECRET=SECRET) as server:
        yield server


@pytest.fixture
def admin(srv: ServerProcess) -> Iterator[QueueHttp]:
    client = QueueHttp(srv.url, hs256("root", "admin"))
    yield client
    client.post("/system/maintenance", {"enabled": False})
    client.close()


@contextmanager
def signed_in(browser: Browser, srv: ServerProcess, token: str, console: Console) -> Iterator[Page]:
    """A page whose tab already holds `token` (as after the prompt)."""
    with browser_page(browser, srv.url, console) as page:
        page.context.add_init_script(f"sessionStorage.setItem({TOKEN_KEY!r}, {token!r})")
        yield page


def test_the_token_prompt_appears_and_the_token_stays_in_the_tab(
    chromium: Browser, srv: ServerProcess, admin: QueueHttp
) -> None:
    admin.push("auth-dash", [{"n": 1}])
    with browser_page(chromium, srv.url, Console(allowed_statuses=(401,))) as page:
        page.goto("/queues")
        dialog = page.locator("dialog.token-dialog")
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text("Authentication required")
        dialog.locator("#token-input").fill(f"Bearer {hs256('viewer', 'read-only')}")
        dialog.get_by_role("button", name="Sign in").click()
        expect(page.locator('#queues tr[data-key="auth-dash"]')).to_be_visible()
        assert page.evaluate(f"sessionStorage.getItem({TOKEN_KEY!r})").startswith("eyJ")
        page.reload()  # the tab keeps its token
        expect(page.locator('#queues tr[data-key="auth-dash"]')).to_be_visible()
        expect(page.locator("dialog.token-dialog")).to_have_count(0)
        other_tab = page.context.new_page()  # another tab asks again
        other_tab.goto("/queues")
        expect(other_tab.locator("dialog.token-dialog")).to_be_visible()
        other_tab.close()


def test_a_dismissed_prompt_leaves_a_sign_in_notice(chromium: Browser, srv: ServerProcess) -> None:
    with browser_page(chromium, srv.url, Console(allowed_statuses=(401,))) as page:
        page.goto("/dlq")
        page.locator("dialog.token-dialog").get_by_role("button", name="Cancel").click()
        expect(page.locator("#dlq .notice.error")).to_contain_text("Sign in to see")
        expect(page.locator("h1")).to_have_text("Dead letters")


def test_an_admin_switches_maintenance_mode_on_and_off(
    chromium: Browser, srv: ServerProcess, admin: QueueHttp
) -> None:
    with signed_in(chromium, srv, hs256("root", "admin"), Console()) as page:
        page.goto("/system")
        push = page.locator('[data-switch="maintenanceMode"]')
        expect(push.locator(".badge")).to_have_text("off")
        push.get_by_role("button", name="Switch on").click()
        page.locator("dialog").get_by_role("button", name="Switch on").click()
        expect(push.locator(".badge")).to_have_text("ON")
        assert admin.get("/system/maintenance")["maintenanceMode"] is True
        push.get_by_role("button", name="Switch off").click()
        page.locator("dialog").get_by_role("button", name="Switch off").click()
        expect(push.locator(".badge")).to_have_text("off")
        assert admin.get("/system/maintenance")["maintenanceMode"] is False


def test_a_read_only_token_is_refused_maintenance_mode(
    chromium: Browser, srv: ServerProcess, admin: QueueHttp
) -> None:
    console = Console(allowed_statuses=(403,))
    with signed_in(chromium, srv, hs256("viewer", "read-only"), console) as page:
        page.goto("/system")
        expect(page.locator("#maintenance-error")).to_contain_text("Your role cannot do this")
        page.locator('[data-switch="maintenanceMode"]').get_by_role(
            "button", name="Switch on"
        ).click()
        page.locator("dialog").get_by_role("button", name="Switch on").click()
        expect(page.locator(".toast.error")).to_contain_text("Your role cannot do this")
        expect(page.locator("#process")).to_contain_text("Worker process")  # the rest works
    assert admin.get("/system/maintenance")["maintenanceMode"] is False


def test_signed_in_the_navigation_stays_one_row_at_1280(
    chromium: Browser, srv: ServerProcess
) -> None:
    """The "Sign out" button takes the room of the refresh time (kept in the tooltip)."""
    with signed_in(chromium, srv, hs256("viewer", "read-only"), Console()) as page:
        page.goto("/queues")
        expect(page.locator("#tools").get_by_role("button", name="Sign out")).to_be_visible()
        tabs = page.locator("#nav a")
        expect(tabs).to_have_count(10)
        for i in range(10):
            assert shown_whole(tabs.nth(i)) is None, shown_whole(tabs.nth(i))
        boxes = [tabs.nth(i).bounding_box() for i in range(10)]
        tops = {round(box["y"]) for box in boxes if box is not None}
        assert len(tops) == 1, f"the tabs take {len(tops)} rows"
        expect(page.locator("#tools .live")).to_have_attribute("title", re.compile("Refreshed at"))
