"""A city report's partition: its dates' daily summaries (`summary_harian`) summed per kota
into the report's table, checked against the daily summaries, and its gold CSV.

Money is summed exactly (`Decimal`); every row and file lists kota in code-point order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, text

from tokokita_etl.city_report import CityReport
from tokokita_etl.city_report.inputs import DAILY_SUMMARIES
from tokokita_etl.errors import ValidationError, WarehouseError
from tokokita_etl.runner.publish import write_csv
from tokokita_etl.warehouse.checksums import rows_checksum
from tokokita_etl.warehouse.database import Warehouse
from tokokita_etl.warehouse.schema import metadata

#: the orders' table a report is built from
DAILY_TABLE = "summary_harian"


def money(value: str | Decimal) -> str:
    """A money amount's canonical text: two decimals."""
    return f"{Decimal(value):.2f}"


def columns(report: CityReport) -> tuple[str, ...]:
    """The report's columns in order: its table's, and its gold file's header."""
    return tuple(column.name for column in report.table().columns)


@dataclass
class Collected:
    """A partition's daily summary rows, summed per kota, and the checksum of each date's rows."""

    rows: list[list[Any]]
    checksums: dict[str, str | None]
    daily_rows: int
    days: int = field(default=0)
    missing: int = field(default=0)


def sum_partition(key: date, daily: Iterable[list[Any]]) -> list[list[Any]]:
    """The partition's rows from canonical daily summary rows (`order_date, kota,
    jumlah_pesanan, total_qty, bruto, bersih`): per kota, the dates with a row (`hari_aktif`)
    and the exact sums, in kota code-point order."""
    sums: dict[str, list[Any]] = {}
    for _, kota, orders, qty, bruto, bersih in daily:
        row = sums.setdefault(kota, [0, 0, 0, Decimal(0), Decimal(0)])
        row[0] += 1
        row[1] += int(orders)
        row[2] += int(qty)
        row[3] += Decimal(bruto)
        row[4] += Decimal(bersih)
    return [[key.isoformat(), kota, days, orders, qty, money(bruto), money(bersih)]
            for kota, (days, orders, qty, bruto, bersih) in sorted(sums.items())]


def collect(report: CityReport, warehouse: Warehouse, key: date,
            expected: Mapping[str, Mapping[str, Any]]) -> Collected:
    """Read the partition's daily summary rows in one read-only transaction, checking each
    date's against the checksum its orders success recorded (`expected[D]["checksum"]`; None: a
    date without a success, which has no rows). A date whose rows are not those is being
    changed by an orders run now: a transient error naming it (a retry reads it again)."""
    daily: list[list[Any]] = []
    checksums: dict[str, str | None] = {}
    dates = report.grain.dates(key)
    DAILY_SUMMARIES.pipeline.declare_tables()
    table = metadata.tables[DAILY_TABLE]
    with warehouse.begin(label="warehouse", read_only=True) as conn:
        for day in dates:
            rows = list(warehouse.partition_rows(conn, table, day))
            want = expected[day.isoformat()]["checksum"]
            # a date without a success has no rows; a done date may have none (no valid order)
            found = rows_checksum(rows) if rows or want is not None else None
            if found != want:
                raise WarehouseError(
                    f"summary_harian of {day}: its rows are not those its orders success "
                    f"recorded (checksum {str(want)[:12]}, found {str(found)[:12]}): an orders "
                    f"run of that date is changing them; {report.of(key)} is read again on "
                    "retry", transient=True)
            checksums[day.isoformat()] = want
            daily.extend(rows)
    done = sum(1 for value in checksums.values() if value is not None)
    return Collected(sum_partition(key, daily), checksums, len(daily), days=done,
                     missing=len(dates) - done)


def _bound(warehouse: Warehouse, value: Any, column: str) -> Any:
    if column in ("bruto", "bersih") and not warehouse.is_sqlite:
        return Decimal(value)
    return value


def replace_partition(report: CityReport, warehouse: Warehouse, key: date,
                      rows: list[list[Any]]) -> dict[str, object]:
    """Replace the partition's rows of the report's table with `rows`, in one transaction (the
    table created first in a warehouse made before it); the warehouse's identity and its
    revision after the change."""
    table, names = report.table(), columns(report)
    with warehouse.begin() as conn:
        table.create(conn, checkfirst=True)
        conn.execute(delete(table).where(table.c[report.key_column] == warehouse.day_param(key)))
        if rows:
            conn.execute(insert(table), [
                {name: warehouse.day_param(key) if name == report.key_column
                 else _bound(warehouse, value, name)
                 for name, value in zip(names, row, strict=True)} for row in rows])
        return warehouse.bump_revision(conn)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def validate_partition(report: CityReport, warehouse: Warehouse, key: date,
                       collected_rows: list[list[Any]],
                       totals: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Check the partition's rows of the report's table against what `collect` summed, against
    the database's own aggregation of the daily summaries, and their money against the done
    dates' totals (`totals[D]`: `bruto`, `bersih` of its orders success). Raises
    ValidationError naming each failed check."""
    dates = report.grain.dates(key)
    first, last = dates[0], dates[-1]
    with warehouse.begin(label="warehouse", read_only=True) as conn:
        held = list(warehouse.partition_rows(conn, report.table(), key))
        aggregated = conn.execute(text(
            f"SELECT kota, COUNT(*), SUM(jumlah_pesanan), SUM(total_qty), "
            f"{warehouse.money_sum('bruto')}, {warehouse.money_sum('bersih')} "
            "FROM summary_harian WHERE order_date BETWEEN :first AND :last GROUP BY kota"),
            {"first": warehouse.day_param(first), "last": warehouse.day_param(last)}).all()
    by_database = [[key.isoformat(), kota, int(days), int(orders), int(qty),
                    money(str(bruto)), money(str(bersih))]
                   for kota, days, orders, qty, bruto, bersih in sorted(aggregated)]
    bruto = sum((Decimal(row[5]) for row in held), Decimal(0))
    bersih = sum((Decimal(row[6]) for row in held), Decimal(0))
    day_bruto = sum((Decimal(t["bruto"]) for t in totals.values()), Decimal(0))
    day_bersih = sum((Decimal(t["bersih"]) for t in totals.values()), Decimal(0))
    checks = [
        Check("rows", held == collected_rows,
              f"{len(held)} rows held, {len(collected_rows)} summed from the daily summaries"),
        Check("daily summaries", held == by_database,
              f"{len(by_database)} kota in the database's own sum of summary_harian "
              f"{first} to {last}"),
        Check("totals", (bruto, bersih) == (day_bruto, day_bersih),
              f"bruto {money(bruto)} / bersih {money(bersih)}; the {len(totals)} done "
              f"dates' totals: {money(day_bruto)} / {money(day_bersih)}"),
    ]
    failed = [check for check in checks if not check.ok]
    result = {"checks": [check.to_dict() for check in checks], "rows": len(held),
              "checksums": {report.checksum_name(key): rows_checksum(held)},
              "bruto": money(bruto), "bersih": money(bersih), "held": held}
    if failed:
        raise ValidationError(f"validation failed for {report.of(key)}: "
                              + "; ".join(f"{c.name}: {c.detail}" for c in failed),
                              result={**result, "held": []})
    return result


def write_gold(report: CityReport, path: Path, rows: list[list[Any]]) -> None:
    """Write the partition's rows as its gold CSV, atomically."""
    write_csv(path, columns(report), rows)
