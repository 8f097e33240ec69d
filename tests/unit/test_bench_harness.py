"""The benchmark harness runs end to end on a small partition and finds identical output.

No timing is asserted: the figures are for bench/RESULTS.md, not for the test suite.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import PG_URL, REPO


def _bench(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_harness_runs_both_sides_and_reports_identical_output(tmp_path, backend):
    pg_server = PG_URL.rsplit("/", 1)[0] + "/postgres"
    report = _bench("--rows", "2000", "--backend", backend, "--json", "--pg-url", pg_server,
                    "--out", str(tmp_path))
    assert report["rows"] == 2000 and report["backend"] == backend
    assert report["identical_output"] is True
    assert report["comparison"]["identical_gold"] and report["comparison"]["identical_quarantine_counts"]
    for key in ("project_s", "baseline_s", "speedup", "project_peak_rss_mb", "baseline_peak_rss_mb"):
        assert report[key] > 0, key
    assert set(report["project_stages_s"]) == {"extract", "transform", "load", "validate",
                                               "publish_gold"}
    assert report["project_rows"]["fact"] == report["generated"]["fact"]
    assert not list((tmp_path / "runs").iterdir())  # run folders and databases are cleaned up
