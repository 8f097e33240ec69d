"""Real-browser tests: Playwright driving Debian's headless Chromium.

Playwright's own browser download is not used; `make test` installs Debian's `chromium`
package when /usr/bin/chromium is missing. A missing browser FAILS the test, it never skips.

    from tests.browser import chromium

    def test_page(tmp_path):
        with chromium() as browser:
            page = browser.new_page()
            ...
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = Path("/usr/bin/chromium")
# the test user may be root, where Chromium's sandbox refuses to start
CHROMIUM_ARGS = ["--no-sandbox"]


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium browser, closed (with Playwright's driver) on exit."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: the browser tests need Debian's chromium package "
                    f"(`make test` installs it as root; otherwise: sudo apt-get install chromium)",
                    pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_status_page(browser: Browser, base_url: str, token: str, *, height: int = 1000):
    """The TokoKita status page as a person reaches it: signed in (the UI's `_token`
    cookie), Airflow's Browse menu, then *TokoKita status*; (its browser context, the page,
    the page's frame once its pipeline tabs are there). The caller closes the context."""
    context = browser.new_context(viewport={"width": 1500, "height": height})
    context.add_cookies([{"name": "_token", "value": token, "url": base_url}])
    page = context.new_page()
    page.goto(f"{base_url}/")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="TokoKita status").click()
    frame = page.frame_locator("iframe")
    frame.locator("#pipelines").wait_for(timeout=60_000)
    return context, page, frame
