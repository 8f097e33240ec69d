"""Gold: the per-kota daily summary CSV, staged by validate and published by publish_gold
(`runner.publish`)."""

from __future__ import annotations

import csv
from datetime import date
from pathlib import Path

from tokokita_etl.errors import EtlError
from tokokita_etl.orders.contract import SUMMARY_COLUMNS, gold_path
from tokokita_etl.runner.publish import staged_name, write_csv


def staged_gold_path(gold_dir: Path, day: date) -> Path:
    """Where validate leaves the checked gold file (same folder, so publishing is a rename)."""
    final = gold_path(gold_dir, day)
    return final.with_name(staged_name(final.name))


def write_gold(path: Path, rows: list[list]) -> None:
    """Write summary rows as the gold CSV, atomically."""
    write_csv(path, SUMMARY_COLUMNS, rows)


def read_gold(path: Path) -> list[dict[str, str]]:
    """Read a gold CSV back."""
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != SUMMARY_COLUMNS:
            raise EtlError(f"{path}: unexpected gold header {reader.fieldnames}")
        return list(reader)
