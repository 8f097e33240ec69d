"""`python -m bench --history N` (bench/bench_history.py) runs end to end on a tiny size: real
nights on both state stores, the ledger written between them, and one JSON line with every
figure. No figure is asserted: the machine's speed sets them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_env
from tests.db.conftest import _pg_server_url

pytestmark = pytest.mark.postgres

STORES = ("files", "postgresql")
FIGURES = ("night_ratio", "night_median_ratio", "status_ratio", "due_ratio", "gate_ratio",
           "page_ratio", "sweep_ratio")


def test_the_history_benchmark_prints_one_json_line_with_every_ratio_per_store(tmp_path: Path):
    nights = 17
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--history", str(nights), "--history-rows", "20",
         "--history-repeat", "1", "--out", str(tmp_path), "--pg-url", _pg_server_url(),
         "--json"],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert (report["history"], report["rows"]) == (nights, 20)
    for store in STORES:
        figures = report[store]
        assert set(FIGURES) <= set(figures), figures
        assert len(figures["nights_early_s"]) == len(figures["nights_late_s"]) == 6
        for look in ("status", "due", "gate", "page"):
            assert figures[f"{look}_10_s"] > 0 and figures[f"{look}_{nights}_s"] > 0
    assert report["files"]["state_json_bytes"] > 0
    assert report["postgresql"]["state_json_bytes"] is None
