"""What a city report's gold file must hold, computed apart from the pipeline: a week's or a
month's rows summed from its daily gold files alone (the command-line and the running-Airflow
tests compare the published file with it)."""

from __future__ import annotations

import csv
from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

#: the weekly gold file's header
WEEK_HEADER = ["week_start", "kota", "hari_aktif", "jumlah_pesanan", "total_qty", "bruto",
               "bersih"]


def csv_rows(path: Path) -> list[list[str]]:
    """Every row of a CSV file, its header first."""
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def independent_week(gold_dir: Path, week: date) -> list[list[str]]:
    """The rows of the week starting `week`, without header, from the daily gold files in
    `gold_dir` (`independent_sum`)."""
    return independent_sum(gold_dir, week, [week + timedelta(days=n) for n in range(7)])


def independent_sum(gold_dir: Path, key: date, days: list[date]) -> list[list[str]]:
    """The rows of the partition keyed `key` made of `days`, without header, from the daily
    gold files in `gold_dir` (a date without one adds nothing): per kota, the dates with a row
    and the exact sums, in kota order."""
    sums: dict[str, list] = defaultdict(lambda: [0, 0, 0, Decimal(0), Decimal(0)])
    for day in days:
        path = gold_dir / f"summary_harian_{day}.csv"
        if not path.exists():
            continue
        with path.open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                found = sums[row["kota"]]
                found[0] += 1
                found[1] += int(row["jumlah_pesanan"])
                found[2] += int(row["total_qty"])
                found[3] += Decimal(row["bruto"])
                found[4] += Decimal(row["bersih"])
    return [[key.isoformat(), kota, str(a), str(b), str(c), f"{d:.2f}", f"{e:.2f}"]
            for kota, (a, b, c, d, e) in sorted(sums.items())]
