"""End-to-end fixtures: each test's hard time limit, and the timings and peak memory of the
running stack, printed after the run.

Every test here gets `TOKOKITA_E2E_TIMEOUT` seconds (default 600; twice that on the scale-out
profile) through pytest-timeout, its share of the module's stack start and teardown included.
The limit raises inside the test (`timeout_method = "signal"` in pyproject.toml), so the
fixtures still stop every process and drop the databases.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.e2e_report import E2E_REPORT

E2E = Path(__file__).resolve().parent
E2E_TIMEOUT_S = int(os.environ.get("TOKOKITA_E2E_TIMEOUT") or "600")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E in item.path.parents and item.get_closest_marker("timeout") is None:
            callspec = getattr(item, "callspec", None)
            celery = callspec is not None and callspec.params.get("e2e") == "celery"
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_S * (2 if celery else 1)))


def pytest_terminal_summary(terminalreporter) -> None:
    """Print the e2e timings and memory, and write them to $TOKOKITA_E2E_REPORT if set."""
    if not E2E_REPORT:
        return
    terminalreporter.section("tokokita end-to-end stack")
    for key, value in E2E_REPORT.items():
        if isinstance(value, float):
            value = f"{value:.1f}"
        elif isinstance(value, int) and key.endswith("bytes"):
            value = f"{value / 2**20:.0f} MiB"
        terminalreporter.write_line(f"{key}: {value}")
    if target := os.environ.get("TOKOKITA_E2E_REPORT"):
        Path(target).write_text(json.dumps(E2E_REPORT, indent=2, default=str) + "\n")
