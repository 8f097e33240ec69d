"""The browser helper starts Debian's Chromium through Playwright and renders a page."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import browser

pytestmark = pytest.mark.browser


def test_chromium_renders_a_page_and_reports_its_title():
    with browser.chromium() as chromium:
        page = chromium.new_page()
        page.goto("data:text/html,<title>TokoKita</title><p id=greeting>Selamat datang</p>")
        assert page.title() == "TokoKita"
        assert page.text_content("#greeting") == "Selamat datang"


def test_a_missing_chromium_fails_the_test_naming_the_package(monkeypatch):
    monkeypatch.setattr(browser, "CHROMIUM", Path("/nonexistent/chromium"))
    with pytest.raises(pytest.fail.Exception, match="apt-get install chromium"), browser.chromium():
        pass
