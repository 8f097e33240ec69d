"""Thin Airflow adapters over `tokokita_etl`: sensor, watermark gate, stage operators, plugin.

Only `airflow.sdk` is imported at module level; the pipeline package (DuckDB, pyarrow,
SQLAlchemy) is imported inside `execute`, so DAG files that import these classes stay cheap
to parse.
"""

from __future__ import annotations
