"""Upgrade in place: the runs made before partitions get the partition date Airflow matches.

Runs of the previous timetable carry D as their partition key (the scheduler's from their
creation, manual and backfill runs from the listener when they started) but no partition
date. Airflow 3.3 identifies a partition's runs by partition date: its backfill plans a run
for every date whose runs have none (*Missing Runs* would re-run the whole history), and the
dag-processor takes the newest run *with* a partition date as the last one, so the first
backfill of old dates would move the scheduler's next run back to them (a second catch-up).
`date_runs_made_before_partitions` gives each such run the partition date of its key, as the
timetable gives new runs (D's local midnight); nothing else of a run changes, and it is
idempotent. `airflow-init` runs it after `airflow db migrate` (`python -m stack.init`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from tokokita_etl.runner.declaration import Pipeline


def date_runs_made_before_partitions(session: Session, pipeline: Pipeline, *, cron: str,
                                     tz: str) -> list[str]:
    """Set the partition date of every run of `pipeline`'s DAG that has a key but none; the
    run ids."""
    from airflow.exceptions import InvalidPartitionKeyError
    from airflow.models.dagrun import DagRun
    from sqlalchemy import select

    from tokokita_airflow.timetable import DailyPartitionTimetable

    timetable = DailyPartitionTimetable(cron, timezone=tz, grain=pipeline.grain.name)
    runs = session.scalars(select(DagRun).where(
        DagRun.dag_id == pipeline.dag_id, DagRun.partition_key.is_not(None),
        DagRun.partition_date.is_(None))).all()
    dated = []
    for run in runs:
        try:
            run.partition_date = timetable.resolve_partition_date(run.partition_key)
        except InvalidPartitionKeyError:  # a key that names no date: its tasks refused it; left as it is
            continue
        dated.append(run.run_id)
    session.flush()
    return dated


def main() -> int:
    """Date the runs made before partitions in the configured metadata database, of the
    project's own pipelines' DAGs (only the orders' had runs then: the others find none). A
    declared pipeline is left out: it came after partitions, and airflow-init may run where
    its module cannot be imported yet."""
    from airflow.utils.session import create_session

    from tokokita_airflow.runtime import configured_settings
    from tokokita_etl.pipelines import PIPELINES

    dated = []
    with create_session() as session:
        for pipeline in PIPELINES.values():
            settings = configured_settings(pipeline)
            dated += date_runs_made_before_partitions(session, pipeline, cron=settings.cron,
                                                      tz=settings.timezone)
    print(f"[airflow-init] runs made before partitions given their partition date: {len(dated)}",
          flush=True)
    return 0
