"""Blocking counts the failures since a date's last success, not its re-runs: the command line
on both warehouse backends (real processes, real SQLite file or PostgreSQL schema)."""

from __future__ import annotations

import json

from tests.conftest import HEADER, SAMPLE_DATES, Workspace, run_cli
from tokokita_etl.state import StateStore

D02 = SAMPLE_DATES[0]
#: a partition without its `diskon` column: a partition error (one attempt, no retry)
NO_DISKON = HEADER.replace(",diskon", "") + "\nTK-1,2026-11-02 10:00:00,C,Medan,X,1,5\n"


def _cli(ws: Workspace, *args: str):
    return run_cli(list(args), cwd=ws.root, env=ws.env(), module=True)


def _row(ws: Workspace) -> dict:
    status = _cli(ws, "status", "--now", "2026-11-03T03:00", "--json")
    assert status.returncode == 0, status.stderr
    return next(r for r in json.loads(status.stdout) if r["date"] == D02.isoformat())


def test_a_date_reprocessed_three_times_that_then_fails_once_is_not_blocked(workspace):
    """Regression: `attempt` counted successes and failures alike and `max_attempts` compared
    it, so a date that succeeded and was forced three times (attempt 4) was blocked 4/3 by its
    first failure; `due` dropped it and `status` called it blocked."""
    ws = workspace
    ws.copy_samples(D02)
    assert _cli(ws, "run", "--date", D02.isoformat()).returncode == 0
    for _ in range(3):
        forced = _cli(ws, "run", "--date", D02.isoformat(), "--force")
        assert forced.returncode == 0, forced.stdout + forced.stderr
    entry = StateStore(ws.state_file, "etl-pesanan-tokokita").read().entry(D02)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("success", 4, 0)

    ws.write_partition(D02, NO_DISKON)
    failed = _cli(ws, "run", "--date", D02.isoformat(), "--force")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    entry = StateStore(ws.state_file, "etl-pesanan-tokokita").read().entry(D02)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("failed", 5, 1)

    row = _row(ws)
    assert (row["state"], row["label"], row["blocked"]) == ("failed", "failed 1/3", False)
    assert (row["attempt"], row["failures"]) == (5, 1)
    due = _cli(ws, "due", "--now", "2026-11-03T03:00", "--json")
    assert json.loads(due.stdout) == [D02.isoformat()]

    # two more failures block it; a corrected partition then needs reset_attempts
    for failures in (2, 3):
        assert _cli(ws, "run", "--date", D02.isoformat()).returncode == 1
        assert StateStore(ws.state_file, "etl-pesanan-tokokita").read().entry(D02)["failures"] == failures
    ws.copy_samples(D02)
    blocked = _cli(ws, "run", "--date", D02.isoformat())
    assert blocked.returncode == 3
    assert "blocked after 3 attempts (max_attempts=3) that failed since its last success" \
        in blocked.stdout
    assert _row(ws)["label"] == "blocked 3/3"
    unblocked = _cli(ws, "run", "--date", D02.isoformat(), "--reset-attempts")
    assert unblocked.returncode == 0, unblocked.stdout + unblocked.stderr
    entry = StateStore(ws.state_file, "etl-pesanan-tokokita").read().entry(D02)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("success", 8, 0)
    assert [(r["previous_attempt"], r["previous_failures"]) for r in entry["resets"]] == [(7, 3)]
