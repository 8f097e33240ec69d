"""A city report's declaration, from its `CityReport`: its stages, what a success records,
its summary line, its lineage, its status columns and the checksum the warehouse holds."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from functools import partial
from typing import Any

from tokokita_etl.city_report import CityReport
from tokokita_etl.city_report.inputs import DAILY_SUMMARIES
from tokokita_etl.city_report.stages import stages
from tokokita_etl.runner.declaration import Column, Gold, Pipeline
from tokokita_etl.runner.upstream import BUILT_FROM, missing_from


def success_fields(records: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The watermark fields of a built partition, from its stage records."""
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
    """What a built partition holds, in the command line's `[summary]` line."""
    from decimal import Decimal

    from tokokita_etl.runner.status import rupiah

    rows = entry["rows"]
    missing = missing_from(entry)
    which = f": {', '.join(missing)}" if missing else ""
    return (f"{rows['kota']} kota from {rows['days']} done dates ({rows['missing']} "
            f"missing{which}), "
            f"{rupiah(Decimal(entry['bruto']))} bruto, {rupiah(Decimal(entry['bersih']))} bersih")


def stage_lineage(report: CityReport, settings: Any, key: date, stage: str,
                  result: Mapping[str, Any] | None) -> tuple[list[Any], list[Any]]:
    """A stage's datasets (`city_report.lineage.stage_lineage`, with the warehouse's tables:
    not imported when the DAG file is parsed)."""
    from tokokita_etl.city_report.lineage import stage_lineage as datasets

    return datasets(report, settings, key, stage, result)


def held_checksums(report: CityReport, warehouse: Any, key: date) -> dict[str, str]:
    """The checksum of the partition's rows the warehouse holds now (imported when asked:
    SQLAlchemy, not at DAG parse)."""
    from tokokita_etl.warehouse.checksums import rows_checksum

    with warehouse.begin(label="warehouse", read_only=True) as conn:
        rows = list(warehouse.partition_rows(conn, report.table(), key))
    return {report.checksum_name(key): rows_checksum(rows)}


def city_report_pipeline(report: CityReport, *, name: str, dag_id: str, description: str,
                         tags: tuple[str, ...], defaults: Mapping[str, Any],
                         asset: tuple[str, str]) -> Pipeline:
    """The declaration of the city report `report`, built from the orders' daily summaries."""
    return Pipeline(
        name=name,
        dag_id=dag_id,
        description=description,
        stages=stages(report),
        outcome=success_fields,
        upstream=DAILY_SUMMARIES,
        gold=Gold(report.gold_name),
        grain=report.grain,
        tags=tags,
        defaults=defaults,
        asset=asset,
        done_line=done_line,
        lineage=partial(stage_lineage, report),
        columns=(Column("days", "days"), Column("missing", "missing"), Column("kota", "kota"),
                 Column("bruto", "bruto", "money"), Column("bersih", "bersih", "money")),
        status_counts=(("days", 4), ("missing", 7), ("kota", 4)),
        schema=report.schema,
        held_checksums=partial(held_checksums, report),
    )
