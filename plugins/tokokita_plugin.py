"""Registers the TokoKita macro, timetable, deadline reference, DAG-run listener and per-date
status page with Airflow."""

from __future__ import annotations

from typing import ClassVar

from airflow.plugins_manager import AirflowPlugin

from tokokita_airflow import listeners
from tokokita_airflow.deadlines import ScheduledRunDeadline
from tokokita_airflow.status_page import app as status_app
from tokokita_airflow.timetable import DailyPartitionTimetable, PartitionDateTimetable


def partition_date(dag_run, params=None) -> str:
    """Macro: D of a run, `{{ macros.tokokita.partition_date(dag_run) }}`: its partition key.
    `params` is accepted, and not read, for templates written when D was a param."""
    from tokokita_airflow.runtime import partition_date_of, shared_settings

    return partition_date_of(dag_run, shared_settings().timezone).isoformat()


class TokokitaPlugin(AirflowPlugin):
    """The TokoKita orders ETL plugin."""

    name = "tokokita"
    macros: ClassVar[list] = [partition_date]
    # PartitionDateTimetable: the name in DAG versions serialized before partitions
    timetables: ClassVar[list] = [DailyPartitionTimetable, PartitionDateTimetable]
    listeners: ClassVar[list] = [listeners]
    deadline_references: ClassVar[list] = [ScheduledRunDeadline]
    fastapi_apps: ClassVar[list] = [
        {"app": status_app, "url_prefix": "/tokokita", "name": "TokoKita status"}]
    external_views: ClassVar[list] = [
        {"name": "TokoKita status", "href": "/tokokita/", "destination": "nav",
         "category": "browse", "url_route": "tokokita"}]
