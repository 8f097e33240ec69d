"""The orders pipeline, declared: TokoKita's nightly orders ETL as the runner runs it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

from tokokita_etl.orders.contract import gold_file_name, raw_file_name
from tokokita_etl.orders.settings import OrdersSettings
from tokokita_etl.orders.stages import (
    extract_lines,
    extract_stage,
    load_lines,
    load_stage,
    publish_gold_stage,
    publish_lines,
    transform_lines,
    transform_stage,
    validate_lines,
    validate_stage,
)
from tokokita_etl.runner.declaration import Chart, Column, Gold, Pipeline, RawFiles, Stage
from tokokita_etl.runner.inputs import RAW, RAW_LINES
from tokokita_etl.runner.policy import RUN_COMMAND
from tokokita_etl.storage import is_url


def _display_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def success_fields(records: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The watermark fields of a successful run, from its stage records."""
    from tokokita_etl.runner.identity import WAREHOUSE  # (with SQLAlchemy: not at DAG parse)

    ext, tra, lod = records["extract"], records["transform"], records["load"]
    val, pub = records["validate"], records["publish_gold"]
    return {
        "rows": {"extracted": ext["rows"], "karantina": lod["karantina"] - tra["duplikat"],
                 "duplikat": tra["duplikat"], "fact": val["fact_rows"],
                 "summary": val["summary_rows"]},
        "checksums": val["checksums"],
        "gold": pub["gold"] if is_url(pub["gold"]) else _display_path(Path(pub["gold"])),
        "bruto": val["bruto"],
        "bersih": val["bersih"],
        "warnings": val.get("warnings", []),
        **({WAREHOUSE: lod[WAREHOUSE]} if lod.get(WAREHOUSE) else {}),
        **({RAW: ext[RAW]} if ext.get(RAW) else {}),
        **({RAW_LINES: ext[RAW_LINES]} if ext.get(RAW_LINES) else {}),
    }


def stage_lineage(settings: Any, day: date, stage: str, result: Mapping[str, Any] | None
                  ) -> tuple[list[Any], list[Any]]:
    """A stage's datasets (`orders.lineage.stage_lineage`, with the warehouse's tables: not
    imported when the DAG file is parsed)."""
    from tokokita_etl.orders.lineage import stage_lineage as datasets

    return datasets(settings, day, stage, result)


def held_checksums(warehouse: Any, day: date) -> dict[str, str]:
    """`orders.checksums.held_checksums` (imported when asked: SQLAlchemy, not at DAG
    parse)."""
    from tokokita_etl.orders.checksums import held_checksums as held

    return held(warehouse, day)


def done_line(entry: Mapping[str, Any]) -> str:
    """What a success did, in the command line's `[summary]` line."""
    from decimal import Decimal

    from tokokita_etl.runner.status import rupiah

    return (f"{entry['rows']['fact']} fact rows, {entry['rows']['summary']} kota, "
            f"{rupiah(Decimal(entry['bruto']))} bruto, {rupiah(Decimal(entry['bersih']))} bersih")


ORDERS = Pipeline(
    name="orders",
    dag_id="tokokita_orders_daily",
    description="TokoKita nightly orders ETL: raw CSV -> fact/summary -> gold CSV",
    stages=(
        Stage("extract", extract_stage, extract_lines),
        Stage("transform", transform_stage, transform_lines),
        Stage("load", load_stage, load_lines, changes_stores=True),
        Stage("validate", validate_stage, validate_lines, changes_stores=True),
        Stage("publish_gold", publish_gold_stage, publish_lines, changes_stores=True),
    ),
    outcome=success_fields,
    raw=RawFiles("raw_dir", raw_file_name),
    gold=Gold(gold_file_name),
    tags=("tokokita", "etl", "orders"),
    asset=("tokokita_summary_harian", "tokokita://gold/summary_harian"),
    lineage=stage_lineage,
    done_line=done_line,
    command=RUN_COMMAND,  # the command line's default pipeline
    columns=(Column("extracted", "extracted"), Column("fact", "fact"),
             Column("karantina", "karantina"), Column("duplikat", "duplikat"),
             Column("quarantine_share", "quarantine", "share",
                    share_of=("karantina", "extracted")),
             Column("bruto", "bruto", "money"), Column("bersih", "bersih", "money")),
    chart=Chart(bars="fact", share="quarantine_share", money="bersih",
                labels={"fact": "valid rows"}),
    status_counts=(("extracted", 9), ("karantina", 9), ("duplikat", 8), ("fact", 8),
                   ("summary", 7)),
    schema="tokokita_etl.orders.schema",
    held_checksums=held_checksums,
    settings=OrdersSettings,
)
