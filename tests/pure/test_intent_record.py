"""The watermark's intent record: a run that crashed between the stores is never a success.

Real watermark and claim files in a temporary state folder and real processes for the claim
holders (one that has exited, this test process that is alive); the kill -9 campaign on whole
runs is tests/faults/test_kill_during_run.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta

import pytest

from tests.conftest import Workspace, in_process_cli
from tokokita_etl.errors import (
    ConcurrentRunError,
    MissingPartitionError,
    StateError,
    WarehouseError,
)
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.claims import read_claim, release_date, settled_watermark
from tokokita_etl.runner.liveness import cli_owner
from tokokita_etl.runner.outcomes import finish_failure
from tokokita_etl.runner.policy import Action
from tokokita_etl.runner.sequence import gate
from tokokita_etl.runner.status import date_states
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.runner.watermark import FAILED, IN_PROGRESS, SUCCESS
from tokokita_etl.warehouse.database import Warehouse

DAY = date(2026, 11, 10)
NOW = datetime(2026, 11, 11, 3, 0, tzinfo=UTC)


@pytest.fixture
def ws(tmp_path) -> Workspace:
    ws = Workspace(tmp_path, f"sqlite:///{tmp_path / 'warehouse.db'}")
    ws.write_partition(DAY, "order_id\n")
    return ws


def _dead_cli_owner() -> str:
    """The owner name of a command-line run whose process has exited."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return cli_owner(NOW).replace(f":{os.getpid()}:", f":{process.pid}:")


def _succeeded(ws: Workspace, attempt: int = 1) -> StateStore:
    Warehouse(ws.warehouse_url, "Asia/Jakarta").ensure_schema()  # (the first run made it)
    store = StateStore(ws.state_file, "orders")
    for _ in range(attempt):
        store.record(DAY, SUCCESS, {"checksums": {"fact": "old"}}, NOW)
    return store


def test_the_gate_writes_the_intent_before_the_first_stage_and_the_success_record_removes_it(ws):
    settings = ws.settings()
    store = _succeeded(ws)
    owner = cli_owner(NOW)
    decision = gate(ORDERS, settings, DAY, force=True, reset_attempts=False, now=NOW, by="cli",
                    owner=owner)
    assert decision.action is Action.RUN
    assert store.read().intent(DAY) == {"run": owner, "stage": "extract",
                                        "since": NOW.isoformat(timespec="seconds")}
    # a live run's own stages still see the success it is re-running
    assert store.read().has_success(DAY)
    store.record(DAY, SUCCESS, {"checksums": {"fact": "new"}}, NOW)
    assert IN_PROGRESS not in store.read().entry(DAY)


def test_a_forced_rerun_that_died_after_its_gate_is_no_success_and_the_next_gate_records_it(ws):
    """Regression for the crash between stores: the old `success` entry stood for rows a
    killed forced re-run had replaced."""
    settings = ws.settings()
    store = _succeeded(ws)
    dead = _dead_cli_owner()
    gate(ORDERS, settings, DAY, force=True, reset_attempts=False, now=NOW, by="cli", owner=dead)
    (settings.staging_path(DAY)).mkdir(parents=True)
    for stage in ("extract", "transform"):
        (settings.staging_path(DAY) / f"{stage}.json").write_text("{}")
    # what every reader sees (`due`, `status`, the page): the watermark settled against the
    # runs that have ended
    assert not settled_watermark(settings, NOW).has_success(DAY), \
        "a dead run's intent beside a success"
    [row] = [r for r in date_states(ORDERS, settings, NOW) if r["date"] == DAY.isoformat()]
    assert (row["state"], row["label"]) == ("needs re-run", "needs re-run")
    assert "ended during load" in row["reason"]

    later = NOW + timedelta(minutes=5)
    decision = gate(ORDERS, settings, DAY, force=False, reset_attempts=False, now=later, by="cli",
                    owner=cli_owner(later))
    assert decision.action is Action.RUN  # not done: a plain run re-runs it
    entry = store.read().entry(DAY)
    assert entry["status"] == FAILED and entry["failed_stage"] == "load"
    assert entry["error"].startswith(f"interrupted: run {dead}")
    assert entry["attempt"] == 2  # the success, then the interrupted run
    assert entry[IN_PROGRESS]["run"] == cli_owner(later)  # the new run's own intent


def test_a_live_runs_intent_is_left_alone_by_another_gate(ws):
    settings = ws.settings()
    store = _succeeded(ws)
    owner = cli_owner(NOW)  # this process: alive
    gate(ORDERS, settings, DAY, force=True, reset_attempts=False, now=NOW, by="cli", owner=owner)
    other = "cli:elsewhere:1:2026-11-11T03:00:00+00:00"
    with pytest.raises(ConcurrentRunError, match="is being processed by"):
        gate(ORDERS, settings, DAY, force=True, reset_attempts=False, now=NOW, by="cli", owner=other)
    assert store.read().intent(DAY)["run"] == owner
    assert read_claim(settings, DAY).owner == owner


def test_a_failure_that_is_no_attempt_before_load_drops_the_intent_and_keeps_the_success(ws):
    settings = ws.settings()
    store = _succeeded(ws)
    owner = cli_owner(NOW)
    gate(ORDERS, settings, DAY, force=True, reset_attempts=False, now=NOW, by="cli", owner=owner)
    finish_failure(ORDERS, settings, DAY, MissingPartitionError("gone"), stage="extract", started=NOW,
                   now=NOW, trigger="cli")
    release_date(settings, DAY, owner)
    entry = store.read().entry(DAY)
    assert IN_PROGRESS not in entry and entry["status"] == SUCCESS
    assert store.read().has_success(DAY)


def test_a_counted_failure_replaces_the_intent_with_the_failure(ws):
    settings = ws.settings()
    store = _succeeded(ws)
    gate(ORDERS, settings, DAY, force=True, reset_attempts=False, now=NOW, by="cli", owner=cli_owner(NOW))
    finish_failure(ORDERS, settings, DAY, WarehouseError("locked"), stage="load", started=NOW, now=NOW,
                   trigger="cli")
    entry = store.read().entry(DAY)
    assert IN_PROGRESS not in entry
    assert (entry["status"], entry["failed_stage"], entry["attempt"]) == (FAILED, "load", 2)


def test_a_hand_edited_intent_that_is_not_an_object_is_a_corrupt_watermark(ws):
    store = _succeeded(ws)
    text = ws.state_file.read_text().replace('"status"', '"in_progress": "yes",\n"status"', 1)
    ws.state_file.write_text(text)
    with pytest.raises(StateError, match="in_progress"):
        store.read()


AIRFLOW_RUN = "airflow:tokokita_orders_etl:manual__2026-11-11T03:00:00+00:00"


@pytest.mark.parametrize("claim", ["released", "expired"])
def test_an_airflow_run_of_a_done_date_that_ended_without_its_outcome_is_due_at_once(
        ws, monkeypatch, capsys, claim):
    """Regression: a forced Airflow run of a done date killed after its gate left its intent;
    `due` and the status still counted the date as done (only a command-line holder could be
    told to have ended) until the next gate of the date recorded the interruption."""
    settings = ws.settings()
    store = _succeeded(ws)
    gate(ORDERS, settings, DAY, force=True, reset_attempts=False, now=NOW, by="airflow",
         owner=AIRFLOW_RUN, holder_finished=lambda owner: None)
    cli = in_process_cli(ws, monkeypatch, capsys, NOW)
    assert cli("due", "--json", "--now", NOW.isoformat()) == (0, "[]\n", "")  # alive: done
    if claim == "released":  # the failure callback of its last task
        release_date(settings, DAY, AIRFLOW_RUN)
        later = NOW
    else:  # killed with its callbacks: the claim's expiry tells
        later = NOW + timedelta(hours=settings.claim_ttl_hours, minutes=1)
    code, out, _ = cli("due", "--json", "--now", later.isoformat(), now=later)
    assert (code, out) == (0, f'["{DAY.isoformat()}"]\n')
    code, out, _ = cli("status", "--json", "--now", later.isoformat(), now=later)
    [row] = [r for r in json.loads(out) if r["date"] == DAY.isoformat()]
    assert (row["state"], row["label"], row["due"]) == ("needs re-run", "needs re-run", True)
    assert store.read().entry(DAY)["status"] == SUCCESS  # reading changed nothing

