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

from playwright.sync_api import Browser, ConsoleMessage, Locator, Page, Playwright, expect

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


def shown_whole(link: Locator) -> str | None:
    """Why `link` is not shown whole where a person could click it (None when it is): its
    box must lie inside the viewport and inside every ancestor that clips its overflow,
    and its centre must hit the link itself (nothing drawn over it)."""
    return link.evaluate(
        """(a) => {
          const box = a.getBoundingClientRect();
          if (box.width === 0 || box.height === 0) return "not displayed";
          const inside = (r) => box.left >= r.left - 0.5 && box.right <= r.right + 0.5
            && box.top >= r.top - 0.5 && box.bottom <= r.bottom + 0.5;
          if (!inside({left: 0, top: 0, right: innerWidth, bottom: innerHeight}))
            return `outside the ${innerWidth}x${innerHeight} viewport (${box.left}..${box.right})`;
          for (let el = a.parentElement; el && el !== document.body; el = el.parentElement) {
            if (getComputedStyle(el).overflowX !== "visible" && !inside(el.getBoundingClientRect()))
              return `cut off by its container (${box.left}..${box.right} in ` +
                `${el.getBoundingClientRect().left}..${el.getBoundingClientRect().right})`;
          }
          const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
          return hit && a.contains(hit) ? null : "covered by another element";
        }"""
    )
