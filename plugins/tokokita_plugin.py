"""Registers the TokoKita macros with Airflow (operators are imported directly by DAG files)."""

from __future__ import annotations

from typing import ClassVar

from airflow.plugins_manager import AirflowPlugin


def partition_date(dag_run, params=None) -> str:
    """Macro: D of a run, `{{ macros.tokokita.partition_date(dag_run, params) }}`."""
    from tokokita_airflow.runtime import partition_date_of

    return partition_date_of(dag_run, params).isoformat()


class TokokitaPlugin(AirflowPlugin):
    """The TokoKita orders ETL plugin."""

    name = "tokokita"
    macros: ClassVar[list] = [partition_date]
