"""The weekly city report, declared: each ISO week's daily summaries per kota, summed into
`summary_mingguan` and a gold CSV once its seven orders dates are settled, and built again
when one of their results changes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

from tokokita_etl.runner.declaration import Pipeline, Stage
from tokokita_etl.runner.schedule import WEEKLY
from tokokita_etl.runner.upstream import BUILT_FROM, missing_from
from tokokita_etl.weekly.inputs import DAILY_SUMMARIES
from tokokita_etl.weekly.stages import (
    collect_lines,
    collect_stage,
    load_lines,
    load_stage,
    publish_gold_stage,
    publish_lines,
    validate_lines,
    validate_stage,
)


def week_fields(records: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The watermark fields of a built week, from its stage records."""
    from tokokita_etl.runner.identity import WAREHOUSE  # (with SQLAlchemy: not at DAG parse)

    collected, validated = records["collect"], records["validate"]
    return {
        "rows": {"days": collected["days"], "missing": collected["missing"],
                 "kota": validated["rows"]},
        "checksums": validated["checksums"],
        "gold": records["publish_gold"]["gold"],
        "bruto": validated["bruto"],
        "bersih": validated["bersih"],
        BUILT_FROM: collected[BUILT_FROM],
        WAREHOUSE: records["load"][WAREHOUSE],
    }


def done_line(entry: Mapping[str, Any]) -> str:
    """What a built week holds, in the command line's `[summary]` line."""
    from decimal import Decimal

    from tokokita_etl.orders.validate import rupiah

    rows = entry["rows"]
    missing = missing_from(entry)
    which = f": {', '.join(missing)}" if missing else ""
    return (f"{rows['kota']} kota from {rows['days']} done dates ({rows['missing']} "
            f"missing{which}), "
            f"{rupiah(Decimal(entry['bruto']))} bruto, {rupiah(Decimal(entry['bersih']))} bersih")


def stage_lineage(settings: Any, week_start: date, stage: str,
                  result: Mapping[str, Any] | None) -> tuple[list[Any], list[Any]]:
    """A stage's datasets (`weekly.lineage.stage_lineage`, with the warehouse's tables: not
    imported when the DAG file is parsed)."""
    from tokokita_etl.weekly.lineage import stage_lineage as datasets

    return datasets(settings, week_start, stage, result)


def held_checksums(warehouse: Any, week_start: date) -> dict[str, str]:
    """The checksum of the week's rows the warehouse holds now (imported when asked:
    SQLAlchemy, not at DAG parse)."""
    from tokokita_etl.warehouse.checksums import rows_checksum
    from tokokita_etl.weekly.build import week_checksum_name
    from tokokita_etl.weekly.schema import summary_mingguan

    with warehouse.begin(label="warehouse", read_only=True) as conn:
        rows = list(warehouse.partition_rows(conn, summary_mingguan, week_start))
    return {week_checksum_name(week_start): rows_checksum(rows)}


WEEKLY_CITY_REPORT = Pipeline(
    name="weekly_city_report",
    dag_id="tokokita_weekly_city_report",
    description="TokoKita weekly city report: seven daily summaries -> summary_mingguan -> gold",
    stages=(
        Stage("collect", collect_stage, collect_lines),
        Stage("load", load_stage, load_lines, changes_stores=True),
        Stage("validate", validate_stage, validate_lines, changes_stores=True),
        Stage("publish_gold", publish_gold_stage, publish_lines, changes_stores=True),
    ),
    outcome=week_fields,
    upstream=DAILY_SUMMARIES,
    grain=WEEKLY,
    tags=("tokokita", "report", "weekly"),
    # Sunday's orders wait window ends on Monday morning: the week waits a day for it, and
    # is due by noon on Monday. Its first run, on 2026-11-09, builds the orders' first whole
    # week (from 2026-11-02)
    defaults={"cron": "0 4 * * 1", "lookback_days": 35, "wait_window_hours": 24,
              "deadline_local_time": "12:00", "start_date": date(2026, 11, 9)},
    asset=("tokokita_summary_mingguan", "tokokita://gold/summary_mingguan"),
    done_line=done_line,
    lineage=stage_lineage,
    columns=("days", "missing", "kota", "bruto", "bersih"),
    status_counts=(("days", 4), ("missing", 7), ("kota", 4)),
    schema="tokokita_etl.weekly.schema",
    held_checksums=held_checksums,
)
