"""The weekly city report's warehouse table, declared on the warehouse's `metadata`
(importing this module is what makes `Warehouse.ensure_schema` create it)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, Numeric, PrimaryKeyConstraint, Table, Text

from tokokita_etl.warehouse.database import Day, metadata

#: a week's sums of the daily summaries' money: two more digits than a day's
WeekMoney = Text().with_variant(Numeric(26, 2), "postgresql")

summary_mingguan = Table(
    "summary_mingguan", metadata,
    Column("week_start", Day, nullable=False),
    Column("kota", Text, nullable=False),
    Column("hari_aktif", Integer, nullable=False),
    Column("jumlah_pesanan", BigInteger, nullable=False),
    Column("total_qty", BigInteger, nullable=False),
    Column("bruto", WeekMoney, nullable=False),
    Column("bersih", WeekMoney, nullable=False),
    PrimaryKeyConstraint("week_start", "kota"),
    info={"partition": "week_start"},
)

#: the gold file's header, the table's columns in order
WEEK_COLUMNS = tuple(column.name for column in summary_mingguan.columns)
