"""Thin Airflow adapters over `tokokita_etl`: sensor, watermark gate, stage operators, plugin.

At module level they import Airflow (`airflow.sdk`; the timetable also `airflow.timetables`
and `airflow.utils.types`, the trigger `airflow.triggers.base`) and of the pipeline only the
light `tokokita_etl.config`; the rest of the pipeline (DuckDB, pyarrow, SQLAlchemy) is
imported inside `execute`, so DAG files that import these classes stay cheap to parse.
"""

from __future__ import annotations
