"""What each stage of the orders reads and writes, as the runner's dataset references
(`runner.lineage`).

| stage | inputs | outputs |
|---|---|---|
| extract | the raw partition (rows, bytes) | |
| transform | the raw partition (rows) | |
| load | the raw partition | `fact_pesanan`, `summary_harian`, `karantina` (rows of D), |
| | | the quarantine file (rows) |
| validate | `fact_pesanan`, `summary_harian` (rows of D, the checks as assertions) | |
| publish_gold | `summary_harian` | the gold file (rows) |
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

from tokokita_etl.orders.contract import gold_path, partition_path, quarantine_path
from tokokita_etl.orders.schema import fact_pesanan, karantina, summary_harian
from tokokita_etl.runner.lineage import DatasetRef, checks_of, file_ref, table_ref

#: the warehouse tables a run writes, as the warehouse declares them
FACT, SUMMARY, QUARANTINE = (table.name for table in (fact_pesanan, summary_harian, karantina))


def stage_lineage(settings: Any, day: date, stage: str, result: Mapping[str, Any] | None
                  ) -> tuple[list[DatasetRef], list[DatasetRef]]:
    """(inputs, outputs) of `stage` for `day`; `result` is the stage's record (None: the stage
    did not finish, so the datasets come without counts)."""
    result = result or {}
    file = file_ref

    def table(name: str, **known: Any) -> DatasetRef:
        return table_ref(settings.warehouse_url, name, **known)

    raw = partition_path(settings.raw_dir, day)
    if stage == "extract":
        return [file(raw, rows=result.get("rows"), size=result.get("bytes"))], []
    if stage == "transform":
        return [file(raw, rows=result.get("rows"))], []
    if stage == "load":
        return [file(raw)], [table(FACT, rows=result.get("fact")),
                             table(SUMMARY, rows=result.get("summary")),
                             table(QUARANTINE, rows=result.get("karantina")),
                             file(quarantine_path(settings.quarantine_dir, day),
                                  rows=result.get("karantina"))]
    if stage == "validate":
        checks = checks_of(result)
        return [table(FACT, rows=result.get("fact_rows"), checks=checks),
                table(SUMMARY, rows=result.get("summary_rows"), checks=checks)], []
    if stage == "publish_gold":
        return [table(SUMMARY)], [file(gold_path(settings.gold_dir, day), rows=result.get("rows"))]
    raise ValueError(f"unknown stage {stage!r}")
