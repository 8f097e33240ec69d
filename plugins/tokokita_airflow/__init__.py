"""Thin Airflow adapters over `tokokita_etl`: sensor, watermark gate, stage operators, plugin.

The modules a DAG file imports (operators, sensor, timetable, deadlines, notifiers) import
at module level Airflow's task SDK (the timetable also `airflow.timetables`) and of the
pipeline only light modules (`tokokita_etl.settings`); the heavy rest (DuckDB, pyarrow,
SQLAlchemy) is imported inside `execute`, so DAG files stay cheap to parse. The plugin's own
parts, loaded by Airflow's processes and never by a DAG file, import more at module level:
the listener `airflow.listeners`, the status page FastAPI and `tokokita_etl.runner.status`.
"""

from __future__ import annotations
