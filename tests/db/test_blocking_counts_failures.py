"""Blocking counts the failures since a date's last success, not its re-runs: the command line
(`cli.main` in-process, as `tokokita-etl` runs it) on both warehouse backends (a real SQLite
file or PostgreSQL schema)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from tests.conftest import HEADER, SAMPLE_DATES, Workspace, in_process_cli
from tokokita_etl.runner.stores.files import StateStore

D02 = SAMPLE_DATES[0]
#: a partition without its `diskon` column: a partition error (one attempt, no retry)
NO_DISKON = HEADER.replace(",diskon", "") + "\nTK-1,2026-11-02 10:00:00,C,Medan,X,1,5\n"


@pytest.fixture
def cli(workspace: Workspace, monkeypatch, capsys):
    """`tokokita-etl ARGS` on the workspace: its exit code and output."""
    invoke = in_process_cli(workspace, monkeypatch, capsys, datetime.now(UTC))

    def run(*args: str) -> SimpleNamespace:
        code, out, err = invoke(*args)
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run


def _row(cli) -> dict:
    status = cli("status", "--now", "2026-11-03T03:00", "--json")
    assert status.returncode == 0, status.stderr
    return next(r for r in json.loads(status.stdout) if r["date"] == D02.isoformat())


def test_a_date_reprocessed_three_times_that_then_fails_once_is_not_blocked(workspace, cli):
    """Regression: `attempt` counted successes and failures alike and `max_attempts` compared
    it, so a date that succeeded and was forced three times (attempt 4) was blocked 4/3 by its
    first failure; `due` dropped it and `status` called it blocked."""
    ws = workspace
    ws.copy_samples(D02)
    assert cli("run", "--date", D02.isoformat()).returncode == 0
    for _ in range(3):
        forced = cli("run", "--date", D02.isoformat(), "--force")
        assert forced.returncode == 0, forced.stdout + forced.stderr
    entry = StateStore(ws.state_file, "orders").read().entry(D02)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("success", 4, 0)

    ws.write_partition(D02, NO_DISKON)
    failed = cli("run", "--date", D02.isoformat(), "--force")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    entry = StateStore(ws.state_file, "orders").read().entry(D02)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("failed", 5, 1)

    row = _row(cli)
    assert (row["state"], row["label"], row["blocked"]) == ("failed", "failed 1/3", False)
    assert (row["attempt"], row["failures"]) == (5, 1)
    due = cli("due", "--now", "2026-11-03T03:00", "--json")
    assert json.loads(due.stdout) == [D02.isoformat()]

    # two more failures block it; a corrected partition then needs reset_attempts
    for failures in (2, 3):
        assert cli("run", "--date", D02.isoformat()).returncode == 1
        assert StateStore(ws.state_file, "orders").read().entry(D02)["failures"] == failures
    ws.copy_samples(D02)
    blocked = cli("run", "--date", D02.isoformat())
    assert blocked.returncode == 3
    assert "blocked after 3 attempts (max_attempts=3) that failed since its last success" \
        in blocked.stdout
    assert _row(cli)["label"] == "blocked 3/3"
    unblocked = cli("run", "--date", D02.isoformat(), "--reset-attempts")
    assert unblocked.returncode == 0, unblocked.stdout + unblocked.stderr
    entry = StateStore(ws.state_file, "orders").read().entry(D02)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("success", 8, 0)
    assert [(r["previous_attempt"], r["previous_failures"]) for r in entry["resets"]] == [(7, 3)]
