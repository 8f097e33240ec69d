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
