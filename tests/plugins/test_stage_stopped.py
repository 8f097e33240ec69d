"""A stage that Airflow stops while it runs (a person's Mark success or Mark failed: the
supervisor sends SIGTERM and the task runner calls the operator's `on_kill`) rolls back and is
recorded as stopped, never as a failure of the partition.

The operators run through `execute()` in this process, with the SIGTERM handler Airflow's task
runner installs (`task_runner._on_term`: it calls `on_kill`) and a real SIGTERM sent while
`load`'s warehouse transaction is open."""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import date
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from devtools.samples import generate_partition
from tests.plugins.test_operators_execute import D02, SECOND, STAGES, context, entry, gate, stage
from tokokita_airflow.runtime import pipeline_settings
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.schema import fact_rows
from tokokita_etl.runner.status import date_states
from tokokita_etl.warehouse.database import Warehouse

THIRD = "manual__2026-11-30T01:10:00+00:00"


def fact_rows_of(day: str) -> list:
    warehouse = Warehouse.from_settings(pipeline_settings(ORDERS))
    with warehouse.begin() as conn:
        return list(fact_rows(warehouse, conn, date.fromisoformat(day)))


def sigterm_once_written(database: Path) -> threading.Thread:
    """SIGTERM to this process as soon as the SQLite warehouse has a write transaction open
    (its rollback journal exists)."""
    journal = database.with_name(database.name + "-journal")

    def send() -> None:
        deadline = time.monotonic() + 60
        while not journal.exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def test_a_stage_stopped_while_it_loads_rolls_back_and_counts_no_failure(project):
    """Bug: Mark success / Mark failed while `load` ran did not stop it (its log said
    "Terminating process", then the load merged all its rows), and each mark was recorded
    as a failure of the partition: two marks brought a good date to failure 2/3."""
    first = context()
    gate().execute(first)
    for name in STAGES:
        stage(name).execute(first)
    before = fact_rows_of(D02)
    generate_partition(project.raw / f"pesanan_{D02}.csv", date.fromisoformat(D02), 200_000,
                       seed=5)

    forced = context(run_id=SECOND, force=True)
    gate().execute(forced)
    stage("extract").execute(forced)
    stage("transform").execute(forced)
    load = stage("load")
    previous = signal.signal(signal.SIGTERM, lambda *_: load.on_kill())
    try:
        sender = sigterm_once_written(project.root / "data" / "warehouse" / "tokokita.db")
        with pytest.raises(AirflowFailException, match="stopped by Airflow"):
            load.execute(forced)
        sender.join(5)
    finally:
        signal.signal(signal.SIGTERM, previous)

    assert fact_rows_of(D02) == before  # nothing merged
    stopped = entry(D02)
    assert (stopped["attempt"], stopped["failures"]) == (1, 0)
    assert stopped["in_progress"]["stopped"].startswith("stage load stopped by Airflow")
    # bug: the stop was recorded at the intent's first stage, extract, not where it happened
    assert stopped["in_progress"]["stopped_stage"] == "load"
    [row] = [r for r in date_states(ORDERS, pipeline_settings(ORDERS), _now()) if r["date"] == D02]
    assert (row["state"], row["label"]) == ("needs re-run", "needs re-run"), row
    assert "records no failure" in row["reason"]
    assert not list(project.root.rglob("*.tmp"))
    for name in ("validate", "publish_gold"):  # the rest of the stopped run does nothing
        with pytest.raises(AirflowSkipException, match="was stopped"):
            stage(name).execute(forced)

    again = context(run_id=THIRD)
    gate().execute(again)
    assert (entry(D02)["failures"], entry(D02)["needs_rerun"]) == (0, True)
    assert entry(D02)["failed_stage"] == "load"  # where the stop happened
    for name in STAGES:
        stage(name).execute(again)
    after = entry(D02)
    assert (after["status"], after["attempt"], after["failures"]) == ("success", 2, 0)
    assert len(fact_rows_of(D02)) == after["rows"]["fact"] > len(before)
    statuses = [m.read_text() for m in project.manifests(D02)]
    assert sum('"status": "stopped"' in text for text in statuses) == 1


def _now():
    from datetime import UTC, datetime

    return datetime.now(UTC)


def test_a_stage_stopped_before_it_ran_is_recorded_at_that_stage(project):
    """Bug: a stop was recorded at the intent's first stage (extract), wherever it happened;
    a stage Airflow stops before it began (its failure callback sees the stop `on_kill`
    noted) is the stage the re-run is recorded at."""
    first = context()
    gate().execute(first)
    stage("extract").execute(first)
    transform = stage("transform")
    transform._stopped = True  # what on_kill notes when Airflow stops the task
    for callback in transform.on_failure_callback:
        callback({**first, "task": transform})
    intent = entry(D02)["in_progress"]
    assert intent["stopped"] == "stage transform stopped by Airflow before it ran (the task " \
                                "was marked or cleared)"
    assert intent["stopped_stage"] == "transform"
    gate().execute(context(run_id=SECOND))
    assert (entry(D02)["needs_rerun"], entry(D02)["failed_stage"]) == (True, "transform")
