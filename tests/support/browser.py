"""Debian's Chromium driven by Playwright for the dashboard's browser tests.

Playwright never downloads a browser here: it launches /usr/bin/chromium (package
`chromium`; scripts/test installs it) with the flags this machine needs. A missing
Chromium fails the test with the command that installs it; nothing is skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, expect

CHROMIUM = "/usr/bin/chromium"
INSTALL = "DEBIAN_FRONTEND=noninteractive apt-get install -y chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]  # fmt: skip
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
TIMEOUT_MS = 10_000
expect.set_options(timeout=TIMEOUT_MS)


def launch(playwright: Playwright) -> Browser:
    if not os.access(CHROMIUM, os.X_OK):
        raise RuntimeError(f"{CHROMIUM} is missing: install it (as root) with\n    {INSTALL}")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)


@dataclass
class Console:
    """What a page printed as an error: console errors and uncaught exceptions."""

    allowed_statuses: tuple[int, ...] = ()
    errors: list[str] = field(default_factory=list)

    def watch(self, page: Page) -> Page:
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        return page

    def _console(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        url = message.location.get("url", "") if message.location else ""
        if message.text.startswith("Failed to load resource") and self._expected(message.text, url):
            return
        self.errors.append(f"{message.text} ({url})")

    def _expected(self, text: str, url: str) -> bool:
        return any(f"status of {status}" in text for status in self.allowed_statuses)

    def assert_clean(self) -> None:
        assert not self.errors, "the page logged errors:\n" + "\n".join(self.errors)


@contextmanager
def browser_page(browser: Browser, base_url: str, console: Console,
                 **options: Any) -> Iterator[Page]:  # fmt: skip
    """A page in a fresh browser context (its own sessionStorage) at 1280x800 unless
    `options` say otherwise; the console is checked when the block ends."""
    context = browser.new_context(base_url=base_url, **{"viewport": DESKTOP, **options})
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield console.watch(context.new_page())
    finally:
        context.close()
    console.assert_clean()
