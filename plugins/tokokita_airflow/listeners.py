"""A DAG-run listener: a run of a TokoKita DAG that has ended holds no claim on its date.

When a run of a declared pipeline's DAG ends (the scheduler finds it finished, or a person
marks it success or failed), its claim on D in that pipeline's state, if it still holds one,
is released (where the state needs no Airflow
connection, see `release_ended_run`): a run whose last task did not release it
(a stage cleared without its downstream tasks, a run marked while a stage was running) would
otherwise read as running in `status`, `due` and the status page until the claim's TTL. An
intent record it left stays, so the date reads *needs re-run* (`runner.claims.reconcile_intent`); when
the run ended in success (a stage cleared alone, a stage marked success), that re-run counts
no failure of the partition (`claims.stop_ended_run`).

Every run carries D as its partition key from its creation (`DailyPartitionTimetable`, and
the trigger's partition key), but for the runs the sweep DAG makes (`tokokita_airflow.sweep`):
Airflow's task SDK triggers a run without a partition key, so when such a run starts, the
scheduler (which calls this listener inside its own transaction) gives it the key and
partition date of the date its configuration names.
"""

from __future__ import annotations

import logging
from datetime import date
from typing import Any

from airflow.listeners import hookimpl

log = logging.getLogger(__name__)


def run_partition(dag_run: Any) -> date | None:
    """The date a run of a TokoKita DAG processes, or None when it is not a TokoKita run or
    names no valid date (its tasks refuse it)."""
    from tokokita_airflow.runtime import partition_date_of
    from tokokita_airflow.timetable import DailyPartitionTimetable
    from tokokita_etl.errors import ConfigError

    dag = getattr(dag_run, "dag", None)
    timetable = getattr(dag, "timetable", None)
    if not isinstance(timetable, DailyPartitionTimetable):
        return None
    try:
        return partition_date_of(dag_run, tz=timetable.zone_name, grain=timetable.grain)
    except ConfigError:
        return None


def release_ended_run(dag_run: Any, *, succeeded: bool = False) -> None:
    """Release the claim an ended run of a TokoKita DAG may still hold on its date, where the
    watermark is reached without an Airflow connection (`connections.state_needs_connection`):
    a connection read here, in the scheduler's or the API's call, would use and close the
    caller's own database session. Where it is not released, or the state cannot be
    reached, the claim stays: the next run of the date takes it over."""
    from tokokita_airflow.connections import state_needs_connection
    from tokokita_airflow.runtime import configured_settings, dag_run_owner, pipeline_of_dag
    from tokokita_etl.errors import EtlError
    from tokokita_etl.runner.claims import release_date, stop_ended_run

    owner, day = dag_run_owner(dag_run), run_partition(dag_run)
    if day is None:
        return
    try:
        pipeline = pipeline_of_dag(dag_run.dag_id)
        if pipeline is None:  # a DAG on the timetable that is no declared pipeline's
            return
        settings = configured_settings(pipeline)
        if state_needs_connection(settings):
            return
        release_date(settings, day, owner)
        if succeeded and stop_ended_run(
                settings, day, owner, "its run ended with a stage cleared alone or marked",
                int(getattr(dag_run, "clear_number", 0) or 0)):
            log.info("%s ended before recording the outcome of %s: the date needs a re-run "
                     "(no failure counted)", owner, day)
    except EtlError as exc:
        log.warning("%s ended; its claim on %s stays until the next run of the date takes it "
                    "over: %s", owner, day, exc)


@hookimpl
def on_dag_run_running(dag_run: Any, msg: str) -> None:
    """Give a starting run of the sweep (`runner.propagation.SWEEP_RUN_PREFIX`) the partition
    key its configuration names, and that key's partition date."""
    from airflow.exceptions import InvalidPartitionKeyError

    from tokokita_airflow.timetable import DailyPartitionTimetable
    from tokokita_etl.runner.propagation import SWEEP_RUN_PREFIX

    if dag_run.partition_key or not str(dag_run.run_id).startswith(SWEEP_RUN_PREFIX):
        return
    timetable = getattr(getattr(dag_run, "dag", None), "timetable", None)
    key = (dag_run.conf or {}).get("partition_date")
    if not isinstance(timetable, DailyPartitionTimetable) or not isinstance(key, str):
        return
    try:
        dag_run.partition_date = timetable.resolve_partition_date(key)
    except InvalidPartitionKeyError:  # its tasks refuse the run, naming the date
        return
    dag_run.partition_key = key
    log.info("Run %s of %s processes partition %s: set as its partition key",
             dag_run.run_id, dag_run.dag_id, key)


@hookimpl
def on_dag_run_success(dag_run: Any, msg: str) -> None:
    """A run that ended (or was marked) success holds no claim; an intent it left (a stage
    cleared alone, a stage marked while it ran) makes the date need a re-run, no failure."""
    release_ended_run(dag_run, succeeded=True)


@hookimpl
def on_dag_run_failed(dag_run: Any, msg: str) -> None:
    """A run that ended (or was marked) failed holds no claim."""
    release_ended_run(dag_run)
