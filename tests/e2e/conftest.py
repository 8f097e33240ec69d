"""End-to-end fixtures: timings and peak memory of the running stack, printed after the run."""

from __future__ import annotations

import json
import os
from pathlib import Path

from stack.ephemeral import E2E_REPORT


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
