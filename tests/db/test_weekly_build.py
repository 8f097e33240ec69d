"""The weekly build's functions (`tokokita_etl.city_report.build` for the weekly report) one
by one, on a real warehouse
(SQLite and PostgreSQL): the week's dates and names, exact sums per kota in code-point order,
collect checking each date's rows against the checksum its success recorded, the week's rows
replaced alone, the three checks, and the gold file."""

from __future__ import annotations

import csv
from datetime import date
from decimal import Decimal

import pytest
from sqlalchemy import insert, text

import tokokita_etl.weekly.schema  # noqa: F401  (declares summary_mingguan on the metadata)
from tests.conftest import Workspace
from tokokita_etl.city_report import build
from tokokita_etl.city_report.build import money
from tokokita_etl.errors import ValidationError, WarehouseError
from tokokita_etl.orders.schema import summary_harian
from tokokita_etl.warehouse.checksums import rows_checksum
from tokokita_etl.warehouse.database import Warehouse
from tokokita_etl.weekly.pipeline import REPORT
from tokokita_etl.weekly.schema import summary_mingguan

WEEK = date(2026, 11, 2)
#: canonical daily summary rows: order_date, kota, jumlah_pesanan, total_qty, bruto, bersih
DAILY = {
    date(2026, 11, 2): [["2026-11-02", "Bandung", 2, 3, "550000.00", "495000.00"],
                        ["2026-11-02", "Jakarta Selatan", 1, 1, "450000.00", "360000.00"]],
    date(2026, 11, 4): [["2026-11-04", "Bandung", 1, 2, "0.10", "0.05"],
                        ["2026-11-04", "Ébène", 4, 4, "1000.20", "1000.20"]],
}


def test_a_week_is_its_seven_dates_from_monday_and_its_names_carry_the_monday():
    assert list(REPORT.grain.dates(WEEK)) == [date(2026, 11, n) for n in range(2, 9)]
    assert REPORT.gold_name(WEEK) == "summary_mingguan_2026-11-02.csv"
    assert REPORT.checksum_name(WEEK) == "summary_mingguan_2026-11-02"
    assert (money("1"), money(Decimal("0.1")), money("12.3")) == ("1.00", "0.10", "12.30")


def test_the_sums_are_exact_per_kota_in_code_point_order_with_the_active_days():
    rows = build.sum_partition(WEEK, [*DAILY[date(2026, 11, 2)], *DAILY[date(2026, 11, 4)]])
    assert rows == [
        ["2026-11-02", "Bandung", 2, 3, 5, "550000.10", "495000.05"],
        ["2026-11-02", "Jakarta Selatan", 1, 1, 1, "450000.00", "360000.00"],
        ["2026-11-02", "Ébène", 1, 4, 4, "1000.20", "1000.20"],  # after every ASCII kota
    ]
    assert build.sum_partition(WEEK, []) == []


@pytest.fixture
def warehouse(workspace: Workspace) -> Warehouse:
    """The workspace's warehouse with its schema and the daily summaries of DAILY."""
    found = Warehouse(workspace.warehouse_url, "Asia/Jakarta")
    found.ensure_schema()
    with found.begin() as conn:
        for day, rows in DAILY.items():
            conn.execute(insert(summary_harian), [
                {"order_date": found.day_param(day), "kota": kota, "jumlah_pesanan": orders,
                 "total_qty": qty,
                 "bruto": bruto if found.is_sqlite else Decimal(bruto),
                 "bersih": bersih if found.is_sqlite else Decimal(bersih)}
                for _, kota, orders, qty, bruto, bersih in rows])
    return found


def expected(**overrides: str | None) -> dict[str, dict]:
    """What the orders' watermark says of the week's dates: the recorded checksum of a done
    date's rows, None for the others."""
    found = {day.isoformat(): {"checksum": None, "attempt": 0} for day in list(REPORT.grain.dates(WEEK))}
    for day, rows in DAILY.items():
        found[day.isoformat()] = {"checksum": rows_checksum(rows), "attempt": 1}
    for day, checksum in overrides.items():
        found[day.replace("_", "-")]["checksum"] = checksum
    return found


def test_collect_reads_the_done_dates_and_counts_the_missing_ones(warehouse):
    found = build.collect(REPORT, warehouse, WEEK, expected())
    assert (found.days, found.missing, found.daily_rows) == (2, 5, 4)
    assert found.rows == build.sum_partition(WEEK, [*DAILY[date(2026, 11, 2)], *DAILY[date(2026, 11, 4)]])
    assert found.checksums["2026-11-03"] is None
    assert found.checksums["2026-11-02"] == rows_checksum(DAILY[date(2026, 11, 2)])


def test_collect_refuses_rows_that_are_not_those_the_success_recorded_as_transient(warehouse):
    with pytest.raises(WarehouseError) as raised:
        build.collect(REPORT, warehouse, WEEK, expected(**{"2026_11_04": "f" * 64}))
    assert raised.value.transient
    assert str(raised.value).startswith(
        "summary_harian of 2026-11-04: its rows are not those its orders success recorded "
        "(checksum ffffffffffff, found ")
    # a date recorded done with rows has none: the checksum of no rows is found
    with pytest.raises(WarehouseError, match=r"summary_harian of 2026-11-03: .*\(checksum "
                                             r"aaaaaaaaaaaa, found e3b0c44298fc\)"):
        build.collect(REPORT, warehouse, WEEK, expected(**{"2026_11_03": "a" * 64}))


def test_replace_week_replaces_that_week_alone_and_counts_one_revision(warehouse):
    other = ["2026-11-09", "Bandung", 1, 1, 1, "1.00", "1.00"]
    build.replace_partition(REPORT, warehouse, date(2026, 11, 9), [other])
    first = build.replace_partition(REPORT, warehouse, WEEK, [["2026-11-02", "Old", 1, 1, 1, "9.00", "9.00"]])
    rows = build.sum_partition(WEEK, DAILY[date(2026, 11, 2)])
    second = build.replace_partition(REPORT, warehouse, WEEK, rows)
    assert second == {"id": first["id"], "revision": first["revision"] + 1}
    with warehouse.begin(read_only=True) as conn:
        held = list(warehouse.partition_rows(conn, summary_mingguan, WEEK))
        others = list(warehouse.partition_rows(conn, summary_mingguan, date(2026, 11, 9)))
    assert held == rows and others == [other]


def totals_of(*days: date) -> dict[str, dict[str, str]]:
    return {day.isoformat(): {
        "bruto": money(sum((Decimal(r[4]) for r in DAILY[day]), Decimal(0))),
        "bersih": money(sum((Decimal(r[5]) for r in DAILY[day]), Decimal(0)))} for day in days}


def test_validate_passes_a_week_equal_to_the_daily_summaries_and_their_totals(warehouse):
    found = build.collect(REPORT, warehouse, WEEK, expected())
    build.replace_partition(REPORT, warehouse, WEEK, found.rows)
    result = build.validate_partition(REPORT, warehouse, WEEK, found.rows, totals_of(*DAILY))
    assert [(c["name"], c["ok"]) for c in result["checks"]] == [
        ("rows", True), ("daily summaries", True), ("totals", True)]
    assert (result["rows"], result["bruto"], result["bersih"]) == (3, "1001000.30", "856000.25")
    assert result["checksums"] == {"summary_mingguan_2026-11-02": rows_checksum(found.rows)}
    assert result["held"] == found.rows


def test_validate_names_each_failed_check(warehouse):
    found = build.collect(REPORT, warehouse, WEEK, expected())
    wrong = [list(row) for row in found.rows]
    wrong[0][3] += 1  # one order too many in Bandung
    build.replace_partition(REPORT, warehouse, WEEK, wrong)
    with pytest.raises(ValidationError) as raised:
        build.validate_partition(REPORT, warehouse, WEEK, found.rows, totals_of(date(2026, 11, 2)))
    message = str(raised.value)
    assert message.startswith("validation failed for the week of 2026-11-02: rows: 3 rows "
                              "held, 3 summed from the daily summaries; daily summaries: ")
    assert "totals: bruto 1001000.30 / bersih 856000.25; the 1 done dates' totals: " \
           "1000000.00 / 855000.00" in message
    assert raised.value.result["held"] == []  # nothing to publish from a failed week


def test_write_gold_writes_the_header_and_rows_atomically(tmp_path):
    rows = build.sum_partition(WEEK, DAILY[date(2026, 11, 2)])
    path = tmp_path / "gold" / REPORT.gold_name(WEEK)
    path.parent.mkdir()
    build.write_gold(REPORT, path, rows)
    with path.open(encoding="utf-8", newline="") as handle:
        assert list(csv.reader(handle)) == [list(build.columns(REPORT)),
                                            *[[str(v) for v in row] for row in rows]]
    assert path.read_bytes().endswith(b"\n") and b"\r" not in path.read_bytes()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_the_database_sum_of_the_week_matches_the_rows_collected(warehouse):
    with warehouse.begin(read_only=True) as conn:
        count = conn.execute(text("SELECT COUNT(*) FROM summary_harian")).scalar_one()
    assert count == 4
    assert build.collect(REPORT, warehouse, WEEK, expected()).daily_rows == count
