"""A forced run whose own gate reconciles the intent of a killed run before it decides.

Reported: D succeeded and was reprocessed until its `attempt` was 3; a forced run over
partition B was killed in load (the entry kept `success` with that run's intent); a second
forced run over partition A, killed after its load, had turned the first run's intent into a
failure (attempt 4, blocked 4/3), and no intent of the second run was recorded. Reproduced on
the command line with SQLite (the tests run on both backends): the second run's gate
reconciled the first run's intent into the failure that made `attempt >= max_attempts`, so
the gate refused the run as blocked (exit 3) before any stage: it changed nothing and wrote
no intent, and the warehouse's rows were A's from the earlier successes (the first run's load
had been rolled back by the kill). The cause of the
block was the count: the three successes were counted against the date. With blocking counting
the failures since the last success, the second forced run has one failure behind it, runs,
and writes its own intent before it changes anything.

The rule every run follows (docs/data-contract.md, "Every run that changes a store writes its
intent first"): a run that changes a store writes its intent first, whatever its gate
reconciled; a run that reconciling has just blocked is refused and changes nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import date

from devtools.samples import generate_partition
from tests.conftest import Workspace, clean_env, run_cli
from tests.faults.conftest import final_files, warehouse_rows
from tokokita_etl.runner.policy import failures_since_success
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import IN_PROGRESS

DAY = date(2026, 11, 10)
ROWS = 50_000


def _cli(ws: Workspace, *args: str) -> subprocess.CompletedProcess:
    return run_cli(["run", "--date", DAY.isoformat(), *args], cwd=ws.root, env=ws.env(),
                   module=True, timeout=600)


def _entry(ws: Workspace) -> dict:
    return StateStore(ws.state_file, "orders").read().entry(DAY)


def _use(ws: Workspace, version: bytes) -> None:
    (ws.raw / f"pesanan_{DAY.isoformat()}.csv").write_bytes(version)


def _kill_forced_in_load(ws: Workspace) -> int:
    """Start a forced run, kill -9 it once its transform has recorded (it is in load). The
    staging folder a killed run left stays as it is (the next gate names the stage it ended
    in from it): the moment is a transform record newer than the one there."""
    record = ws.staging / DAY.isoformat() / "transform.json"

    def stamp() -> int:
        try:
            return record.stat().st_mtime_ns
        except FileNotFoundError:
            return 0

    before = stamp()
    process = subprocess.Popen(
        [sys.executable, "-m", "tokokita_etl", "run", "--date", DAY.isoformat(), "--force"],
        cwd=ws.root, env=clean_env(**ws.env()), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while stamp() == before:
        assert process.poll() is None and time.monotonic() < deadline, "ended before load"
        time.sleep(0.001)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    return process.pid


def _versions(ws: Workspace) -> tuple[bytes, bytes]:
    a, b = ws.root / "a.csv", ws.root / "b.csv"
    generate_partition(a, DAY, ROWS, seed=1)
    generate_partition(b, DAY, ROWS, seed=2)
    ws.raw.mkdir(parents=True, exist_ok=True)
    return a.read_bytes(), b.read_bytes()


def test_a_forced_run_after_reconciling_a_killed_reprocess_writes_its_own_intent(
        workspace):
    """Regression (the report): D done and reprocessed to attempt 3; a forced run over B
    killed in load; a second forced run over A, killed in load, was refused as blocked by the
    failure its own gate had just recorded, and its interruption (as the report read it) was
    recorded nowhere. It runs now, and the entry holds its own intent when it is killed."""
    ws = workspace
    a, b = _versions(ws)
    _use(ws, a)
    assert _cli(ws).returncode == 0
    for _ in range(2):
        assert _cli(ws, "--force").returncode == 0
    assert (_entry(ws)["attempt"], _entry(ws)["failures"]) == (3, 0)

    _use(ws, b)
    first = _kill_forced_in_load(ws)
    entry = _entry(ws)
    assert entry["status"] == "success" and entry[IN_PROGRESS]["run"].split(":")[2] == str(first)

    _use(ws, a)
    second = _kill_forced_in_load(ws)
    entry = _entry(ws)
    # the first run recorded as interrupted (one failure since the last success), the
    # second run's own intent written before its load
    assert (entry["status"], entry["attempt"], failures_since_success(entry)) == ("failed", 4, 1)
    assert entry["failed_stage"] == "load" and str(first) in entry["error"]
    assert entry[IN_PROGRESS]["run"].split(":")[2] == str(second)

    again = _cli(ws)  # the plain run records the second interruption and re-runs D
    assert again.returncode == 0, again.stdout + again.stderr
    entry = _entry(ws)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("success", 6, 0)


def test_a_forced_run_that_reconciling_has_just_blocked_changes_nothing_and_says_how_to_unblock(
        workspace):
    """The documented rule for a forced run of a date that reconciling has just blocked: with
    two failures since the last success, a forced run killed in load leaves its intent; the
    next forced run's gate records it as the third failure, so the run is refused (exit 3, a
    blocked manifest) before any stage: no intent, the warehouse rows and files as the kill
    left them, and the message and `status` say the date is blocked and how to unblock it."""
    ws = workspace
    a, b = _versions(ws)
    _use(ws, a)
    assert _cli(ws).returncode == 0
    _use(ws, b"order_id,order_ts\nTK-1,2026-11-10 10:00:00\n")  # no kota: a partition error
    for _ in range(2):
        assert _cli(ws, "--force").returncode == 1
    assert failures_since_success(_entry(ws)) == 2
    _use(ws, a)
    killed = _kill_forced_in_load(ws)
    assert _entry(ws)[IN_PROGRESS]["run"].split(":")[2] == str(killed)
    rows, files = warehouse_rows(ws, DAY), final_files(ws)
    status = run_cli(["status", "--now", "2026-11-11T03:00"], cwd=ws.root, env=ws.env(),
                     module=True)
    assert "needs re-run" in status.stdout and "to unblock" in status.stdout, status.stdout

    _use(ws, b)
    refused = _cli(ws, "--force")
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "is blocked after 3 attempts (max_attempts=3) that failed since its last success" \
        in refused.stdout
    assert "--reset-attempts" in refused.stdout
    entry = _entry(ws)
    assert IN_PROGRESS not in entry  # the refused run wrote no intent: it changed nothing
    assert (entry["status"], failures_since_success(entry)) == ("failed", 3)
    assert str(killed) in entry["error"] and "needs a re-run" in entry["error"]
    assert warehouse_rows(ws, DAY) == rows and final_files(ws) == files
    claim = StateStore(ws.state_file, "orders").read_claim(DAY)  # the refused run took none
    assert claim is None or claim.owner.split(":")[2] == str(killed)

    unblocked = _cli(ws, "--reset-attempts")
    assert unblocked.returncode == 0, unblocked.stdout + unblocked.stderr
    assert _entry(ws)["status"] == "success" and IN_PROGRESS not in _entry(ws)
