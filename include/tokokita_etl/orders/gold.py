"""Gold: the per-kota daily summary CSV, staged by validate and renamed into place by publish."""

from __future__ import annotations

import csv
import os
from datetime import date
from pathlib import Path

from tokokita_etl.errors import EtlError
from tokokita_etl.files import atomic_writer
from tokokita_etl.orders.contract import STAGED_GOLD_PREFIX, SUMMARY_COLUMNS
from tokokita_etl.settings.layout import gold_path


def staged_gold_path(gold_dir: Path, day: date) -> Path:
    """Where validate leaves the checked gold file (same folder, so publishing is a rename)."""
    final = gold_path(gold_dir, day)
    return final.with_name(f"{STAGED_GOLD_PREFIX}{final.name}")


def write_gold(path: Path, rows: list[list]) -> None:
    """Write summary rows as the gold CSV, atomically."""
    with atomic_writer(path, newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(SUMMARY_COLUMNS)
        writer.writerows(rows)


def read_gold(path: Path) -> list[dict[str, str]]:
    """Read a gold CSV back."""
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != SUMMARY_COLUMNS:
            raise EtlError(f"{path}: unexpected gold header {reader.fieldnames}")
        return list(reader)


def publish_gold(gold_dir: Path, day: date) -> Path:
    """Rename the validated, staged gold file into place."""
    staged = staged_gold_path(gold_dir, day)
    final = gold_path(gold_dir, day)
    if not staged.exists():
        raise EtlError(f"{staged}: no validated gold file to publish for {day}; run validate first")
    os.replace(staged, final)
    return final
