"""What each stage of a city report reads and writes, as the runner's dataset references
(`runner.lineage`, naming each table's partitions: the partition's dates of `summary_harian`, its
key of the report's table).

| stage | inputs | outputs |
|---|---|---|
| collect | `summary_harian` (the partition's dates, rows) | |
| load | | the report's table (the partition, rows) |
| validate | the report's table (the partition, the checks), `summary_harian` (its dates) | |
| publish_gold | the report's table (the partition) | the gold file (rows) |
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

from tokokita_etl.city_report import CityReport
from tokokita_etl.city_report.stages import gold_location
from tokokita_etl.runner.lineage import DatasetRef, checks_of, file_ref, table_ref

DAILY = "summary_harian"


def stage_lineage(report: CityReport, settings: Any, key: date, stage: str,
                  result: Mapping[str, Any] | None) -> tuple[list[DatasetRef], list[DatasetRef]]:
    """(inputs, outputs) of `stage` for the partition `key`; `result` is the stage's record
    (None: the stage did not finish, so the datasets come without counts)."""
    result = result or {}
    days = tuple(("order_date", day.isoformat()) for day in report.grain.dates(key))
    own = ((report.key_column, key.isoformat()),)

    def table(name: str, partitions: tuple[tuple[str, str], ...], **known: Any) -> DatasetRef:
        return table_ref(settings.warehouse_url, name, partitions=partitions, **known)

    if stage == "collect":
        return [table(DAILY, days, rows=result.get("daily_rows"))], []
    if stage == "load":
        return [], [table(report.table_name, own, rows=result.get("rows"))]
    if stage == "validate":
        checks = checks_of(result)
        return [table(report.table_name, own, rows=result.get("rows"), checks=checks),
                table(DAILY, days)], []
    if stage == "publish_gold":
        return [table(report.table_name, own)], [file_ref(gold_location(report, settings, key),
                                                          rows=result.get("rows"))]
    raise ValueError(f"unknown stage {stage!r}")
