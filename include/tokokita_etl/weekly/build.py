"""The weekly city report: a week's seven daily summaries (`summary_harian`) summed per kota
into `summary_mingguan`, checked against the daily summaries, and its gold CSV.

Money is summed exactly (`Decimal`); every row and file lists kota in code-point order.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, text

from tokokita_etl.errors import ValidationError, WarehouseError
from tokokita_etl.files import atomic_writer
from tokokita_etl.orders.schema import summary_rows
from tokokita_etl.warehouse.checksums import rows_checksum
from tokokita_etl.warehouse.database import Warehouse
from tokokita_etl.weekly.schema import WEEK_COLUMNS, summary_mingguan

DAYS = 7


def week_dates(week_start: date) -> list[date]:
    return [week_start + timedelta(days=n) for n in range(DAYS)]


def gold_name(week_start: date) -> str:
    """The gold file of a week."""
    return f"summary_mingguan_{week_start.isoformat()}.csv"


def week_checksum_name(week_start: date) -> str:
    """The key of a week's checksum in its watermark entry."""
    return f"summary_mingguan_{week_start.isoformat()}"


def money(value: str | Decimal) -> str:
    """A money amount's canonical text: two decimals."""
    return f"{Decimal(value):.2f}"


@dataclass
class Collected:
    """A week's daily summary rows, summed per kota, and the checksum of each date's rows."""

    rows: list[list[Any]]
    checksums: dict[str, str | None]
    daily_rows: int
    days: int = field(default=0)
    missing: int = field(default=0)


def sum_week(week_start: date, daily: Iterable[list[Any]]) -> list[list[Any]]:
    """The week's rows from canonical daily summary rows (`order_date, kota, jumlah_pesanan,
    total_qty, bruto, bersih`): per kota, the dates with a row (`hari_aktif`) and the exact
    sums, in kota code-point order."""
    sums: dict[str, list[Any]] = {}
    for _, kota, orders, qty, bruto, bersih in daily:
        row = sums.setdefault(kota, [0, 0, 0, Decimal(0), Decimal(0)])
        row[0] += 1
        row[1] += int(orders)
        row[2] += int(qty)
        row[3] += Decimal(bruto)
        row[4] += Decimal(bersih)
    return [[week_start.isoformat(), kota, days, orders, qty, money(bruto), money(bersih)]
            for kota, (days, orders, qty, bruto, bersih) in sorted(sums.items())]


def collect(warehouse: Warehouse, week_start: date,
            expected: Mapping[str, Mapping[str, Any]]) -> Collected:
    """Read the week's daily summary rows in one read-only transaction, checking each date's
    against the checksum its orders success recorded (`expected[D]["checksum"]`; None: a date
    without a success, which has no rows). A date whose rows are not those is being changed by
    an orders run now: a transient error naming it (a retry reads it again)."""
    daily: list[list[Any]] = []
    checksums: dict[str, str | None] = {}
    with warehouse.begin(label="warehouse", read_only=True) as conn:
        for day in week_dates(week_start):
            rows = list(summary_rows(warehouse, conn, day))
            want = expected[day.isoformat()]["checksum"]
            # a date without a success has no rows; a done date may have none (no valid order)
            found = rows_checksum(rows) if rows or want is not None else None
            if found != want:
                raise WarehouseError(
                    f"summary_harian of {day}: its rows are not those its orders success "
                    f"recorded (checksum {str(want)[:12]}, found {str(found)[:12]}): an orders "
                    "run of that date is changing them; the week is read again on retry",
                    transient=True)
            checksums[day.isoformat()] = want
            daily.extend(rows)
    done = sum(1 for value in checksums.values() if value is not None)
    return Collected(sum_week(week_start, daily), checksums, len(daily), days=done,
                     missing=DAYS - done)


def _bound(warehouse: Warehouse, value: Any, column: str) -> Any:
    if column in ("bruto", "bersih") and not warehouse.is_sqlite:
        return Decimal(value)
    return value


def replace_week(warehouse: Warehouse, week_start: date, rows: list[list[Any]]
                 ) -> dict[str, object]:
    """Replace the week's rows of `summary_mingguan` with `rows`, in one transaction (the
    table created first in a warehouse made before it); the warehouse's identity and its
    revision after the change."""
    with warehouse.begin() as conn:
        summary_mingguan.create(conn, checkfirst=True)
        conn.execute(delete(summary_mingguan).where(
            summary_mingguan.c.week_start == warehouse.day_param(week_start)))
        if rows:
            conn.execute(insert(summary_mingguan), [
                {name: warehouse.day_param(week_start) if name == "week_start"
                 else _bound(warehouse, value, name)
                 for name, value in zip(WEEK_COLUMNS, row, strict=True)} for row in rows])
        return warehouse.bump_revision(conn)


@dataclass
class WeekCheck:
    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def validate_week(warehouse: Warehouse, week_start: date, collected_rows: list[list[Any]],
                  totals: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Check the week's rows of `summary_mingguan` against what `collect` summed, against the
    database's own aggregation of the daily summaries, and their money against the done
    dates' totals (`totals[D]`: `bruto`, `bersih` of its orders success). Raises
    ValidationError naming each failed check."""
    first, last = week_start, week_start + timedelta(days=DAYS - 1)
    with warehouse.begin(label="warehouse", read_only=True) as conn:
        held = list(warehouse.partition_rows(conn, summary_mingguan, week_start))
        aggregated = conn.execute(text(
            f"SELECT kota, COUNT(*), SUM(jumlah_pesanan), SUM(total_qty), "
            f"{warehouse.money_sum('bruto')}, {warehouse.money_sum('bersih')} "
            "FROM summary_harian WHERE order_date BETWEEN :first AND :last GROUP BY kota"),
            {"first": warehouse.day_param(first), "last": warehouse.day_param(last)}).all()
    by_database = [[week_start.isoformat(), kota, int(days), int(orders), int(qty),
                    money(str(bruto)), money(str(bersih))]
                   for kota, days, orders, qty, bruto, bersih in sorted(aggregated)]
    bruto = sum((Decimal(row[5]) for row in held), Decimal(0))
    bersih = sum((Decimal(row[6]) for row in held), Decimal(0))
    day_bruto = sum((Decimal(t["bruto"]) for t in totals.values()), Decimal(0))
    day_bersih = sum((Decimal(t["bersih"]) for t in totals.values()), Decimal(0))
    checks = [
        WeekCheck("rows", held == collected_rows,
                  f"{len(held)} rows held, {len(collected_rows)} summed from the daily summaries"),
        WeekCheck("daily summaries", held == by_database,
                  f"{len(by_database)} kota in the database's own sum of summary_harian "
                  f"{first} to {last}"),
        WeekCheck("totals", (bruto, bersih) == (day_bruto, day_bersih),
                  f"bruto {money(bruto)} / bersih {money(bersih)}; the {len(totals)} done "
                  f"dates' totals: {money(day_bruto)} / {money(day_bersih)}"),
    ]
    failed = [check for check in checks if not check.ok]
    result = {"checks": [check.to_dict() for check in checks], "rows": len(held),
              "checksums": {week_checksum_name(week_start): rows_checksum(held)},
              "bruto": money(bruto), "bersih": money(bersih), "held": held}
    if failed:
        raise ValidationError(f"validation failed for the week of {week_start}: "
                              + "; ".join(f"{c.name}: {c.detail}" for c in failed),
                              result={**result, "held": []})
    return result


def write_gold(path: Path, rows: list[list[Any]]) -> None:
    """Write the week's rows as its gold CSV, atomically."""
    with atomic_writer(path, newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(WEEK_COLUMNS)
        writer.writerows(rows)
