"""`tokokita-etl run ... | head -1`: a reader that closes stdout early must not fail the run
(real processes, real pipes)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import date

from tests.conftest import CLI, SAMPLE_DATES, Workspace, clean_env

D02 = SAMPLE_DATES[0]


def _assert_succeeded(ws: Workspace, day: date, stderr: str) -> None:
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    entry = json.loads(ws.state_file.read_text(encoding="utf-8"))["runs"][day.isoformat()]
    assert (entry["status"], entry["attempt"]) == ("success", 1)
    assert ws.gold_file(day).exists()
    [manifest] = ws.manifests(day)
    assert json.loads(manifest.read_text(encoding="utf-8"))["status"] == "success"


def test_run_whose_stdout_reader_has_gone_still_succeeds_without_an_attempt_failure(
        sqlite_workspace):
    """Bug: with stdout's reader gone, the run's own progress logging raised BrokenPipeError,
    so the run failed and recorded a failed attempt."""
    ws = sqlite_workspace
    ws.copy_samples(D02)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first line: every write is EPIPE
    try:
        proc = subprocess.run([str(CLI), "run", "--date", D02.isoformat()], cwd=ws.root,
                              env=clean_env(**ws.env()), stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    _assert_succeeded(ws, D02, proc.stderr)


def test_run_piped_into_head_one_succeeds(sqlite_workspace):
    """Bug: `tokokita-etl run ... | head -1` failed the run and recorded an attempt."""
    ws = sqlite_workspace
    ws.copy_samples(D02)
    proc = subprocess.run(
        ["bash", "-c", f'set -o pipefail; "{CLI}" run --date {D02.isoformat()} | head -1'],
        cwd=ws.root, env=clean_env(**ws.env()), capture_output=True, text=True, timeout=120,
        check=False)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 1
    _assert_succeeded(ws, D02, proc.stderr)
