"""`UpstreamSettledSensor` called as Airflow calls it (execute, poke) with a minimal context:
it waits while a week's orders dates are not settled, naming them, records a `waiting`
manifest and skips at the end of its window, passes once they are settled, and refuses a
partition key that starts no week at once."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from tokokita_airflow.runtime import pipeline_settings
from tokokita_airflow.sensors import UpstreamSettledSensor
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.sequence import run_for_date
from tokokita_etl.weekly.pipeline import WEEKLY_CITY_REPORT

WEEK = "2026-11-02"  # the sample dates 11-02..11-04 have files; 11-05..11-08 none


def context(key: str, first_poke: datetime | None = None) -> dict:
    dag_run = SimpleNamespace(dag_id=WEEKLY_CITY_REPORT.dag_id, run_id="manual__w",
                              run_type="manual", logical_date=None,
                              run_after=datetime.now(UTC), partition_key=key,
                              clear_number=0, conf={})
    ti = SimpleNamespace(get_first_reschedule_date=lambda _context: first_poke)
    return {"dag_run": dag_run, "params": {}, "ti": ti}


def sensor() -> UpstreamSettledSensor:
    return UpstreamSettledSensor(task_id="wait_for_inputs", pipeline=WEEKLY_CITY_REPORT,
                                 wait_window=timedelta(hours=24))


def test_it_waits_then_skips_naming_the_dates_with_a_waiting_manifest(project):
    assert sensor().poke(context(WEEK, datetime.now(UTC) - timedelta(hours=23))) is False
    with pytest.raises(AirflowSkipException, match="2026-11-02 waits for its orders dates") \
            as skipped:
        sensor().poke(context(WEEK, datetime.now(UTC) - timedelta(hours=25)))
    assert "2026-11-02 (not processed), 2026-11-03 (not processed), 2026-11-04 (not " \
           "processed)" in str(skipped.value)
    [manifest] = (project.root / "data" / "state" / "weekly_city_report" / "runs").glob(
        f"run-{WEEK}-*.json")
    assert json.loads(manifest.read_text())["status"] == "waiting"


def test_it_passes_once_every_date_is_done_or_missing(project):
    settings = pipeline_settings(ORDERS)
    for day in ("2026-11-02", "2026-11-03", "2026-11-04"):
        outcome = run_for_date(ORDERS, settings, date.fromisoformat(day), log=lambda _: None)
        assert outcome.status == "success", outcome
    assert sensor().poke(context(WEEK)) is True  # 11-05..11-08: missing, long past


def test_a_key_that_is_no_monday_fails_at_once_naming_the_week(project):
    with pytest.raises(AirflowFailException, match="its partition is 2026-11-02"):
        sensor().execute(context("2026-11-04"))


def test_it_serves_only_a_pipeline_built_from_another_ones_results():
    with pytest.raises(ValueError, match="RawPartitionSensor"):
        UpstreamSettledSensor(task_id="wait", pipeline=ORDERS)
