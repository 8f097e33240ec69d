"""A running stack with a person signed in to its Airflow UI in Chromium: what the browser
modules of this folder (`test_browser_ui.py`, `test_browser_connections.py`) share."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stack.ephemeral import DAG_ID, PASSWORD, USERNAME, EphemeralStack
from stack.rest import TERMINAL, wait_for
from tests.browser import chromium

if TYPE_CHECKING:
    import pytest
    from playwright.sync_api import Browser, BrowserContext, Page

JKT = "Asia/Jakarta"
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
VIEWPORT = {"width": 1280, "height": 800}
UI_TIMEOUT_MS = 30_000  # every browser action and expectation
PLAYWRIGHT_EXPECT_TIMEOUT_MS = 5_000  # Playwright's default, restored afterwards
RUN_TIMEOUT_S = 180  # a run, from trigger or clear to its end


def new_context(browser: Browser, zone: str = JKT) -> BrowserContext:
    """A fresh browser profile at 1280x800 in time zone `zone`, every wait bounded."""
    context = browser.new_context(viewport=VIEWPORT, timezone_id=zone)
    context.set_default_timeout(UI_TIMEOUT_MS)
    return context


def log_in(page: Page, base_url: str) -> None:
    """Sign in through Airflow's login page (the UI redirects there first)."""
    from playwright.sync_api import expect

    page.goto(base_url + "/")
    expect(page).to_have_url(re.compile(r"/auth/login"), timeout=UI_TIMEOUT_MS)
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    # bounded here, not by the caller's expect options: a busy stack can take seconds
    expect(page.get_by_role("heading", name="Welcome")).to_be_visible(timeout=UI_TIMEOUT_MS)


@contextlib.contextmanager
def signed_in(stack: EphemeralStack, request: pytest.FixtureRequest, *,
              seed: Callable[[Path], None], shots: Path,
              shot_glob: str) -> Iterator[tuple[Browser, Page, list[dict[str, Any]]]]:
    """Prepare the stack, `seed` its raw folder, start it and wait for its scheduled run to
    end; then Chromium, signed in: (browser, page, the scheduled runs). On exit the stack
    stops (no process left behind) and, with TOKOKITA_SAVE_SCREENSHOTS=1 when no test of the
    module failed, `shot_glob`'s screenshots go to docs/screenshots."""
    failed_before = request.session.testsfailed
    seen = []
    try:
        stack.prepare()
        seed(stack.data / "raw")
        stack.start()
        seen = stack.stack.processes()
        stack.api.wait_dag(DAG_ID, timeout=120)
        scheduled = wait_for(lambda: [r for r in stack.api.dag_runs(DAG_ID, run_type="scheduled")
                                      if r["state"] in TERMINAL], RUN_TIMEOUT_S, 1.0,
                             "the scheduled run")
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        with chromium() as browser:
            context = new_context(browser)
            page = context.new_page()
            log_in(page, stack.target.api_url)
            yield browser, page, scheduled
            context.close()
    finally:
        with contextlib.suppress(ImportError):
            from playwright.sync_api import expect

            expect.set_options(timeout=PLAYWRIGHT_EXPECT_TIMEOUT_MS)
        stack.close()
        left = [p.pid for p in seen if p.is_running() and p.status() != "zombie"]
        assert not left, f"processes left behind: {left}"
    if os.environ.get("TOKOKITA_SAVE_SCREENSHOTS") == "1" and \
            request.session.testsfailed == failed_before:
        DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for path in sorted(shots.glob(shot_glob)):
            shutil.copyfile(path, DOCS_SCREENSHOTS / path.name)
