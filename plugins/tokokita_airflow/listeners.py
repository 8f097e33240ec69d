"""A DAG-run listener: every run of a TokoKita DAG shows the date it processes.

The scheduler gives its own runs their partition key D when it creates them
(`PartitionDateTimetable`). A manual run (the trigger form, the REST API) and a backfill run
are created without one, so when such a run starts, the scheduler (which calls this
listener inside its own transaction) sets its partition key to the date its tasks will
process: the `partition_date` of its configuration, else the day before its logical date in
the pipeline's time zone, the rule every task applies (`runtime.partition_date_of`). The
run's header, the runs list's *Partition Key* column and the REST API's run record then name
D for every run.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

log = logging.getLogger(__name__)


def partition_key_for(dag_run: Any) -> str | None:
    """The partition key a starting run of a TokoKita DAG should carry, or None when it has
    one already, is not a TokoKita run, or names no valid date (its tasks refuse it)."""
    from tokokita_airflow.runtime import partition_date_of
    from tokokita_airflow.timetable import PartitionDateTimetable
    from tokokita_etl.errors import ConfigError

    dag = getattr(dag_run, "dag", None)
    timetable = getattr(dag, "timetable", None)
    if dag_run.partition_key or not isinstance(timetable, PartitionDateTimetable):
        return None
    try:
        return partition_date_of(dag_run, dag_run.conf, tz=timetable.zone_name).isoformat()
    except ConfigError:
        return None


@hookimpl
def on_dag_run_running(dag_run: Any, msg: str) -> None:
    """Give a starting manual or backfill run its partition key."""
    key = partition_key_for(dag_run)
    if key is not None:
        dag_run.partition_key = key
        log.info("Run %s of %s processes partition %s: set as its partition key",
                 dag_run.run_id, dag_run.dag_id, key)
