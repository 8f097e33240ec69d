"""The city reports' build without a database: a partition's rows summed per kota from
daily summary rows (exact money, `hari_aktif`, code-point order), and what names a partition
of the weekly and the monthly report (table, key column, gold file, checksum, header)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from tokokita_etl.city_report.build import columns, money, sum_partition, write_gold
from tokokita_etl.monthly.pipeline import REPORT as MONTHLY
from tokokita_etl.weekly.pipeline import REPORT as WEEKLY

DAILY = [  # order_date, kota, jumlah_pesanan, total_qty, bruto, bersih (canonical text)
    ["2026-11-02", "Medan", 2, 3, "100000.10", "90000.05"],
    ["2026-11-02", "Bandung", 1, 1, "0.10", "0.10"],
    ["2026-11-03", "Medan", 1, 4, "0.20", "0.15"],
    ["2026-11-30", "Bandung", 5, 9, "999999999999.99", "999999999999.99"],
    ["2026-11-30", "Ängelholm", 1, 1, "1.00", "1.00"],
]


def test_a_partition_sums_its_days_per_kota_exactly_with_its_active_days_in_code_point_order():
    rows = sum_partition(date(2026, 11, 1), DAILY)
    assert rows == [
        ["2026-11-01", "Bandung", 2, 6, 10, "1000000000000.09", "1000000000000.09"],
        ["2026-11-01", "Medan", 2, 3, 7, "100000.30", "90000.20"],
        ["2026-11-01", "Ängelholm", 1, 1, 1, "1.00", "1.00"],
    ]
    # no float: 0.1 + 0.2 is exactly 0.30
    assert money(Decimal("0.1") + Decimal("0.2")) == "0.30"
    assert sum_partition(date(2026, 11, 1), []) == []


def test_the_weekly_and_monthly_reports_name_their_partitions_by_their_first_date():
    assert columns(WEEKLY) == ("week_start", "kota", "hari_aktif", "jumlah_pesanan",
                               "total_qty", "bruto", "bersih")
    assert columns(MONTHLY) == ("month_start", "kota", "hari_aktif", "jumlah_pesanan",
                                "total_qty", "bruto", "bersih")
    assert WEEKLY.gold_name(date(2026, 11, 2)) == "summary_mingguan_2026-11-02.csv"
    assert MONTHLY.gold_name(date(2026, 11, 1)) == "summary_bulanan_2026-11-01.csv"
    assert MONTHLY.checksum_name(date(2026, 11, 1)) == "summary_bulanan_2026-11-01"
    assert MONTHLY.of(date(2026, 11, 1)) == "the month of 2026-11-01"
    assert WEEKLY.of(date(2026, 11, 2)) == "the week of 2026-11-02"
    assert [key.name for key in MONTHLY.table().primary_key] == ["month_start", "kota"]
    assert MONTHLY.table().info == {"partition": "month_start"}


def test_a_gold_file_is_the_header_then_the_rows(tmp_path):
    path = tmp_path / "summary_bulanan_2026-11-01.csv"
    write_gold(MONTHLY, path, sum_partition(date(2026, 11, 1), DAILY[:2]))
    assert path.read_text(encoding="utf-8") == (
        "month_start,kota,hari_aktif,jumlah_pesanan,total_qty,bruto,bersih\n"
        "2026-11-01,Bandung,1,1,1,0.10,0.10\n"
        "2026-11-01,Medan,1,2,3,100000.10,90000.05\n")
