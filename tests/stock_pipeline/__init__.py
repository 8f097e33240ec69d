"""A second pipeline for the runner, as a user would write one: a package of its own whose
`pyproject.toml` registers it under the entry point group `tokokita_etl.pipelines` (installed,
it is found with no other change), or named by the `declarations` setting
(`"stock_pipeline:STOCK"`). A daily stock count in two stages, from `stok_YYYY-MM-DD.csv`
(`sku,qty`) to `gold_dir/stok_harian_YYYY-MM-DD.csv` (each sku's total, in code-point order),
on its own schedule (`0 3 * * *`). It shares nothing with the orders but the runner."""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

from tokokita_etl.errors import DataError, MissingPartitionError
from tokokita_etl.files import write_text_atomic
from tokokita_etl.runner.declaration import Column, Gold, Pipeline, RawFiles, Stage
from tokokita_etl.runner.staging import read_stage

RAW = RawFiles("raw_dir", lambda day: f"stok_{day.isoformat()}.csv")


GOLD = Gold(lambda day: f"stok_harian_{day.isoformat()}.csv")


def gold_path(settings: Any, day: date) -> Path:
    return Path(GOLD.path(settings, day))


def count(settings: Any, day: date) -> dict[str, Any]:
    """Each sku's total quantity; a row that is no `sku,qty` fails naming its line."""
    path = Path(RAW.path(settings, day))
    if not RAW.exists(settings, day):
        raise MissingPartitionError(f"{path}: no stock file for {day}")
    totals: dict[str, int] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        if next(reader, None) != ["sku", "qty"]:
            raise DataError(f"{path}: line 1: expected the header sku,qty")
        for line, row in enumerate(reader, start=2):
            if len(row) != 2 or not row[0] or not row[1].isdigit():
                raise DataError(f"{path}: line {line}: expected sku,qty, got {row!r}")
            totals[row[0]] = totals.get(row[0], 0) + int(row[1])
    return {"rows": len(totals), "totals": dict(sorted(totals.items()))}


def publish(settings: Any, day: date) -> dict[str, Any]:
    """Write the day's totals to its gold file, atomically."""
    totals = read_stage(settings, day, "count")["totals"]
    text = "sku,qty\n" + "".join(f"{sku},{qty}\n" for sku, qty in totals.items())
    target = gold_path(settings, day)
    write_text_atomic(target, text)
    return {"gold": str(target), "rows": len(totals),
            "sha256": hashlib.sha256(text.encode()).hexdigest()}


def outcome(records: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The watermark fields of a success."""
    published = records["publish"]
    return {"rows": {"extracted": records["count"]["rows"], "summary": published["rows"]},
            "checksums": {f"gold_{Path(published['gold']).stem}": published["sha256"]},
            "gold": published["gold"]}


STOCK = Pipeline(
    name="stock",
    dag_id="tokokita_stock_daily",
    description="A daily stock count: raw stok CSV -> totals per sku -> gold CSV",
    stages=(
        Stage("count", count, lambda record, day: [f"[count] {day}: {record['rows']} skus"]),
        Stage("publish", publish, lambda record, day: [f"[publish] {record['gold']}"],
              changes_stores=True),
    ),
    outcome=outcome,
    raw=RAW,
    gold=GOLD,
    defaults={"cron": "0 3 * * *"},
    columns=(Column("extracted", "extracted"),),
    tags=("tokokita", "stock"),
)
