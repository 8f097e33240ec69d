"""Registers the TokoKita macro, timetable, DAG-run listener and per-date status page with Airflow."""

from __future__ import annotations

from typing import ClassVar

from airflow.plugins_manager import AirflowPlugin

from tokokita_airflow import listeners


def partition_date(dag_run, params=None) -> str:
    """Macro: D of a run, `{{ macros.tokokita.partition_date(dag_run, params) }}`."""
    from tokokita_airflow.runtime import partition_date_of

    return partition_date_of(dag_run, params).isoformat()


def _timetable():
    from tokokita_airflow.timetable import PartitionDateTimetable

    return PartitionDateTimetable


def _deadline_reference():
    from tokokita_airflow.deadlines import ScheduledRunDeadline

    return ScheduledRunDeadline


def _status_app():
    from tokokita_airflow.status_page import app

    return app


class TokokitaPlugin(AirflowPlugin):
    """The TokoKita orders ETL plugin."""

    name = "tokokita"
    macros: ClassVar[list] = [partition_date]
    timetables: ClassVar[list] = [_timetable()]
    listeners: ClassVar[list] = [listeners]
    deadline_references: ClassVar[list] = [_deadline_reference()]
    fastapi_apps: ClassVar[list] = [
        {"app": _status_app(), "url_prefix": "/tokokita", "name": "TokoKita status"}]
    external_views: ClassVar[list] = [
        {"name": "TokoKita status", "href": "/tokokita/", "destination": "nav",
         "category": "browse", "url_route": "tokokita"}]
