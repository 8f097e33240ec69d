"""The table of a city report: per partition (its first date) and kota, the days with orders
(`hari_aktif`) and the exact sums of the daily summaries."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, Numeric, PrimaryKeyConstraint, Table, Text

from tokokita_etl.warehouse.schema import Day, metadata

#: a report's sums of the daily summaries' money: two more digits than a day's
ReportMoney = Text().with_variant(Numeric(26, 2), "postgresql")


def city_table(name: str, key_column: str) -> Table:
    """Declare the table `name` of a city report on the warehouse's metadata, keyed by
    (`key_column`, kota); its gold file's header is its columns in order."""
    return Table(
        name, metadata,
        Column(key_column, Day, nullable=False),
        Column("kota", Text, nullable=False),
        Column("hari_aktif", Integer, nullable=False),
        Column("jumlah_pesanan", BigInteger, nullable=False),
        Column("total_qty", BigInteger, nullable=False),
        Column("bruto", ReportMoney, nullable=False),
        Column("bersih", ReportMoney, nullable=False),
        PrimaryKeyConstraint(key_column, "kota"),
        info={"partition": key_column},
    )
