"""The warehouse's column types (exact on both backends), its metadata, on which each
pipeline's domain declares its tables, and the warehouse's own identity table."""

from __future__ import annotations

from sqlalchemy import TIMESTAMP, BigInteger, Column, Date, MetaData, Numeric, Table, Text

# SQLite has no exact decimal or zoned timestamp: money is stored as text with exactly two
# decimals (summed as integer cents), dates and timestamps as ISO 8601 text.
Money = Text().with_variant(Numeric(18, 2), "postgresql")
# a day's sum of NUMERIC(18,2) amounts can exceed NUMERIC(18,2): summary columns are wider
SummaryMoney = Text().with_variant(Numeric(24, 2), "postgresql")
Day = Text().with_variant(Date(), "postgresql")
Timestamp = Text().with_variant(TIMESTAMP(timezone=True), "postgresql")

#: every table of the warehouse: its identity (below) and the tables each pipeline's domain
#: declares on it (`tokokita_etl.orders.schema`); a table's `info["partition"]` names the
#: column holding its partition's date
metadata = MetaData()

#: the warehouse's identity: one row, written with the schema (`tokokita_etl.runner.identity`); the
#: watermark records the id and revision of the warehouse its entries describe
warehouse_identity = Table(
    "warehouse_identity", metadata,
    Column("warehouse_id", Text, primary_key=True),
    Column("created_by", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("revision", BigInteger, nullable=False),
)
