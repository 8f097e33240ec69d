"""The orders' own settings, beside their stages: DuckDB's memory in transform and the volume
check of validate."""

from __future__ import annotations

from typing import Annotated

from tokokita_etl.runner.settings import RawInputSettings
from tokokita_etl.settings.values import Share, duckdb_size_problem, text_rule


class OrdersSettings(RawInputSettings):
    """The orders pipeline's settings: the shared ones, the runner's and their own."""

    #: DuckDB's own memory in transform; beyond it its temp tables spill to the staging folder
    #: (with the rest of the process this bounds a large partition's peak RSS)
    duckdb_memory_limit: Annotated[str, text_rule(problem=duckdb_size_problem)] = "400MB"
    #: a run whose valid rows are below this share of the trailing median is reported
    volume_min_share: Share = 0.5
    #: `warn`, or `fail`: a low-volume or zero-row run fails validation
    volume_check: Annotated[str, text_rule(choices=("warn", "fail"))] = "warn"
