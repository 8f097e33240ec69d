"""Upgrade in place, on a real metadata database: runs made by the previous timetable (a key,
a logical date, no partition date) are found by Airflow's own partition queries afterwards."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import pendulum
import pytest

from tests.airflow_support import ensure_metadata_db
from tokokita_airflow.timetable import DailyPartitionTimetable
from tokokita_airflow.upgrade import date_runs_made_before_partitions
from tokokita_etl.orders.pipeline import ORDERS

pytestmark = pytest.mark.airflow

JKT = "Asia/Jakarta"


def test_runs_made_before_partitions_get_the_partition_date_airflow_matches_them_by():
    """Without it a Missing Runs backfill over old dates re-ran them all (Airflow matches a
    date's runs by partition date), and the dag-processor, which takes the newest run with a
    partition date as the last one, moved the next scheduled run back to a backfilled date."""
    from airflow.dag_processing.collection import _get_latest_runs_stmt_partitioned
    from airflow.models.backfill import _get_latest_dag_run_row_query
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunType

    ensure_metadata_db()
    dag_id = f"upgrade_{uuid.uuid4().hex[:8]}"
    pipeline = replace(ORDERS, dag_id=dag_id)  # the orders' declaration, a DAG of this test
    timetable = DailyPartitionTimetable("30 2 * * *", timezone=JKT)
    days = [f"2026-11-0{n}" for n in (2, 3, 4)]
    with create_session() as session:
        for day in days:  # as PartitionDateTimetable made them: fire time = logical date
            fire = pendulum.parse(day, tz=JKT) + timedelta(days=1, hours=2, minutes=30)
            session.add(DagRun(dag_id=dag_id, run_id=f"scheduled__{day}__{fire.isoformat()}",
                               run_type=DagRunType.SCHEDULED, logical_date=fire,
                               run_after=fire, partition_key=day, state=DagRunState.SUCCESS))
        session.flush()
        dated = date_runs_made_before_partitions(session, pipeline, cron="30 2 * * *", tz=JKT)
        assert len(dated) == 3
        assert date_runs_made_before_partitions(session, pipeline, cron="30 2 * * *",
                                                tz=JKT) == []  # idempotent
        # a backfill of an old date finds its run (Missing Runs leaves it alone)
        info = next(iter(timetable.iter_partition_dagrun_infos(
            earliest=pendulum.parse(days[1]), latest=pendulum.parse(days[1]))))
        found = session.scalar(_get_latest_dag_run_row_query(dag_id=dag_id, info=info))
        assert found is not None and found.partition_key == days[1]
        assert found.logical_date is not None  # the run's history is kept as it was
        # the last run is the newest old one: the next scheduled run is the day after it
        latest = session.scalar(_get_latest_runs_stmt_partitioned(dag_id))
        assert latest.partition_key == days[-1]
        from airflow.timetables.base import TimeRestriction

        following = timetable.next_dagrun_info_v2(
            last_dagrun_info=timetable.run_info_from_dag_run(dag_run=latest),
            restriction=TimeRestriction(earliest=None, latest=None, catchup=True))
        assert following.partition_key == "2026-11-05"
        session.rollback()


def test_the_upgrade_in_place_runs_where_a_declared_pipeline_cannot_be_imported_yet(monkeypatch,
                                                                                   capsys):
    """Regression: airflow-init's upgrade in place loaded every declared pipeline and failed
    (`cannot import 'stock_pipeline:STOCK'`) when the declared module was not yet where the
    services import it from, so the stack never started."""
    from tokokita_airflow.upgrade import main

    ensure_metadata_db()
    monkeypatch.setenv("TOKOKITA_DECLARATIONS", "not_installed_anywhere:PIPELINE")
    assert main() == 0
    assert "runs made before partitions given their partition date: 0" in capsys.readouterr().out
