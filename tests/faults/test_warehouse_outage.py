"""Fault injection: the PostgreSQL warehouse goes down (`pg_ctl stop -m immediate`) while a run
is loading or validating.

A throw-away cluster of the fault suite (tests/faults/conftest.py) holds the warehouse. After a
clean run of a 100,000-row partition, a forced re-run is started as a real process; when its
stage records show it in load (or in validate), the cluster is stopped at once: every backend
ends mid-statement. The run must fail with one `[error]` line naming the warehouse and no
traceback; the watermark records a failed attempt at load or validate (a transient warehouse
error: it counts, it is retried, it is not the partition's fault), with no intent left and no
claim. After the cluster is started again, a plain re-run succeeds with the clean run's
checksums, gold file and fact rows.

Quick mode: one outage in load. `TOKOKITA_FAULTS=long`: `TOKOKITA_OUTAGES` outages (default
8) at moments spread over load and validate.
"""

from __future__ import annotations

import os
import subprocess
import time
from datetime import date

from sqlalchemy import text

from devtools.samples import generate_partition
from tests.conftest import Workspace, run_cli
from tests.faults.conftest import LONG, forced_run_past_stage
from tokokita_etl.errors import WarehouseError
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.policy import Action, ErrorKind, classify, retry_decision
from tokokita_etl.runner.staging import run_stage
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import IN_PROGRESS
from tokokita_etl.warehouse.database import Warehouse

DAY = date(2026, 11, 10)
ROWS = 100_000
OUTAGES = int(os.environ.get("TOKOKITA_OUTAGES") or 8) if LONG else 1
#: (stage record that shows the run inside the stage after it, seconds to wait after it)
MOMENTS = [("transform", 0.4), ("load", 0.0), ("transform", 0.0), ("transform", 0.9)]
#: the outages leave failed attempts: enough of them that the date never blocks
SETTINGS = {"TOKOKITA_MAX_ATTEMPTS": "1000"}


def _run(ws: Workspace, *args: str) -> subprocess.CompletedProcess:
    return run_cli(["run", "--date", DAY.isoformat(), *args], cwd=ws.root,
                   env=ws.env(**SETTINGS), module=True, timeout=600)


def _entry(ws: Workspace) -> dict:
    return StateStore(ws.state_file, "orders").read().entry(DAY)


def _fact_rows(ws: Workspace) -> int:
    with Warehouse(ws.warehouse_url, "Asia/Jakarta").begin() as conn:
        return conn.execute(text("SELECT COUNT(*) FROM fact_pesanan WHERE order_date = :d"),
                            {"d": DAY}).scalar_one()


def _forced_run_with_outage(ws: Workspace, cluster, after: str, delay: float,
                            ) -> tuple[int, str, str]:
    """A forced re-run whose warehouse is stopped `delay` s after stage `after` recorded its
    output: (exit code, stdout, stderr)."""
    process = forced_run_past_stage(ws, DAY, SETTINGS, after)
    try:
        time.sleep(delay)
        cluster.stop_immediately()
        out, err = process.communicate(timeout=300)
        return process.returncode, out, err
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _check_failure(ws: Workspace, code: int, err: str, attempts_before: int) -> str:
    """The run failed cleanly and the watermark says so; returns the failed stage."""
    display = Warehouse(ws.warehouse_url, "Asia/Jakarta").display_url
    assert code == 1, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("[error]")]
    assert len(errors) == 1, err
    assert errors[0].startswith(("[error] load: ", "[error] validate: ")), errors
    assert f"warehouse {display}: " in errors[0], errors
    entry = _entry(ws)
    assert entry["status"] == "failed", entry
    assert entry["failed_stage"] in ("load", "validate"), entry
    assert entry["error"].startswith(f"warehouse {display}: "), entry
    assert entry["attempt"] == attempts_before + 1, entry  # a transient error is an attempt
    assert IN_PROGRESS not in entry, entry
    assert list((ws.state_dir / "claims").glob("*.json")) == []
    return entry["failed_stage"]


def _check_rerun(ws: Workspace, checksums: dict, gold: bytes, fact: int) -> None:
    again = _run(ws)  # not forced: a failed date is due again
    assert again.returncode == 0, again.stdout + again.stderr
    entry = _entry(ws)
    assert entry["status"] == "success" and IN_PROGRESS not in entry, entry
    assert entry["checksums"] == checksums
    assert ws.gold_file(DAY).read_bytes() == gold
    assert _fact_rows(ws) == fact == entry["rows"]["fact"]


def test_warehouse_stopped_during_a_run_fails_it_cleanly_and_a_rerun_restores_it(
        tmp_path, controlled_pg):
    """Guards a warehouse outage in the middle of load or validate: a traceback, an error
    that does not name the warehouse, a failure recorded as the partition's fault or not at
    all, a left intent or claim, or a re-run that does not restore the clean run's state."""
    ws = Workspace(tmp_path, controlled_pg.create_database())
    generate_partition(ws.raw / f"pesanan_{DAY.isoformat()}.csv", DAY, ROWS, seed=7)
    clean = _run(ws)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    checksums, gold = _entry(ws)["checksums"], ws.gold_file(DAY).read_bytes()
    fact = _fact_rows(ws)

    failed_in: dict[str, int] = {}
    reasons: set[str] = set()
    other_lines = 0  # stderr lines besides the error (the driver's own warnings)
    missed = 0
    for n in range(OUTAGES):
        after, delay = MOMENTS[n % len(MOMENTS)]
        attempts = _entry(ws)["attempt"]
        code, _, err = _forced_run_with_outage(ws, controlled_pg, after, delay)
        if code == 0 and LONG:  # the run finished before the server went down
            missed += 1
        else:
            stage = _check_failure(ws, code, err, attempts)
            failed_in[stage] = failed_in.get(stage, 0) + 1
            reasons.add(_entry(ws)["error"].split(": ", 1)[1])
            other_lines += sum(1 for line in err.splitlines() if not line.startswith("[error]"))
            if n == 0:
                # the same stage, in this process, against the stopped server: the error the
                # run recorded is a transient warehouse error, retried, not the partition's
                settings = ws.settings()
                try:
                    run_stage(ORDERS, settings, DAY, stage)
                except WarehouseError as exc:
                    assert exc.transient and classify(exc) is ErrorKind.TRANSIENT
                    state = StateStore(ws.state_file, "orders").read()
                    assert retry_decision(exc, state, DAY, 1000).action is Action.RUN
                else:
                    raise AssertionError(f"{stage} succeeded with the warehouse down")
        controlled_pg.start()
        if code != 0:
            _check_rerun(ws, checksums, gold, fact)
    print(f"\noutages: {OUTAGES}, failed in {failed_in}, finished before the stop: {missed}; "
          f"errors: {sorted(reasons)}; other stderr lines: {other_lines}")
    assert sum(failed_in.values()) >= (OUTAGES + 1) // 2, (failed_in, missed)
