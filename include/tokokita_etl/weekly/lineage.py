"""What each stage of the weekly city report reads and writes, as OpenLineage datasets (the
orders' `DatasetRef`, naming each table's partitions: the week's seven dates of
`summary_harian`, its Monday of `summary_mingguan`).

| stage | inputs | outputs |
|---|---|---|
| collect | `summary_harian` (the seven dates, rows) | |
| load | | `summary_mingguan` (the week, rows) |
| validate | `summary_mingguan` (the week, the checks), `summary_harian` (the seven dates) | |
| publish_gold | `summary_mingguan` (the week) | the gold file (rows) |
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

from tokokita_etl.orders.lineage import Check, DatasetRef, location_dataset, table_dataset
from tokokita_etl.weekly.build import week_dates
from tokokita_etl.weekly.stages import gold_location

DAILY, WEEK = "summary_harian", "summary_mingguan"


def stage_lineage(settings: Any, week_start: date, stage: str,
                  result: Mapping[str, Any] | None) -> tuple[list[DatasetRef], list[DatasetRef]]:
    """(inputs, outputs) of `stage` for the week of `week_start`; `result` is the stage's
    record (None: the stage did not finish, so the datasets come without counts)."""
    result = result or {}
    days = tuple(("order_date", day.isoformat()) for day in week_dates(week_start))
    week = (("week_start", week_start.isoformat()),)

    def table(name: str, partitions: tuple[tuple[str, str], ...], **known: Any) -> DatasetRef:
        return DatasetRef(*table_dataset(settings.warehouse_url, name), partitions=partitions,
                          **known)

    if stage == "collect":
        return [table(DAILY, days, rows=result.get("daily_rows"))], []
    if stage == "load":
        return [], [table(WEEK, week, rows=result.get("rows"))]
    if stage == "validate":
        checks = tuple(Check(c["name"], bool(c["ok"]), c["detail"])
                       for c in result.get("checks", []))
        return [table(WEEK, week, rows=result.get("rows"), checks=checks),
                table(DAILY, days)], []
    if stage == "publish_gold":
        return [table(WEEK, week)], [DatasetRef(*location_dataset(
            gold_location(settings, week_start)), rows=result.get("rows"))]
    raise ValueError(f"unknown stage {stage!r}")
