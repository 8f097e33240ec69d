"""The orders pipeline's warehouse tables, declared on the warehouse's `metadata` (importing
this module is what makes `Warehouse.ensure_schema` create them), and what it reads back: a
date's canonical fact and summary rows and its fact totals."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from typing import NamedTuple

from sqlalchemy import BigInteger, Column, Index, Integer, PrimaryKeyConstraint, Table, Text, text
from sqlalchemy.engine import Connection

from tokokita_etl.orders.contract import REQUIRED_COLUMNS
from tokokita_etl.warehouse.database import Warehouse
from tokokita_etl.warehouse.schema import Day, Money, SummaryMoney, Timestamp, metadata

fact_pesanan = Table(
    "fact_pesanan", metadata,
    Column("order_id", Text, primary_key=True),
    Column("order_date", Day, nullable=False),
    Column("order_ts", Timestamp, nullable=False),
    Column("customer_id", Text, nullable=False),
    Column("kota", Text, nullable=False),
    Column("produk", Text, nullable=False),
    Column("qty", Integer, nullable=False),
    Column("harga_satuan", Money, nullable=False),
    Column("diskon", Money, nullable=False),
    Column("bruto", Money, nullable=False),
    Column("bersih", Money, nullable=False),
    info={"partition": "order_date"},
)
# one date's rows in order_id code-point order straight from the index: `key_order` needs no
# sort. One index per dialect (SQLite's BINARY collation is already code-point order; it has
# no "C"): a `postgresql_ops` argument would make SQLAlchemy import its whole PostgreSQL
# dialect package in every process, SQLite runs included
Index("ix_fact_pesanan_date_order", fact_pesanan.c.order_date,
      fact_pesanan.c.order_id.collate("C")).ddl_if(dialect="postgresql")
Index("ix_fact_pesanan_date_order", fact_pesanan.c.order_date,
      fact_pesanan.c.order_id).ddl_if(dialect="sqlite")
summary_harian = Table(
    "summary_harian", metadata,
    Column("order_date", Day, nullable=False),
    Column("kota", Text, nullable=False),
    Column("jumlah_pesanan", BigInteger, nullable=False),
    Column("total_qty", BigInteger, nullable=False),
    Column("bruto", SummaryMoney, nullable=False),
    Column("bersih", SummaryMoney, nullable=False),
    PrimaryKeyConstraint("order_date", "kota"),
    info={"partition": "order_date"},
)
karantina = Table(
    "karantina", metadata,
    Column("order_date", Day, nullable=False),
    Column("line", BigInteger, nullable=False),
    Column("reason", Text, nullable=False),
    *[Column(name, Text) for name in REQUIRED_COLUMNS],
    Column("raw", Text),
    PrimaryKeyConstraint("order_date", "line"),
    info={"partition": "order_date"},
)


class FactTotals(NamedTuple):
    """What `fact_totals` counts and sums for one date."""

    rows: int
    bruto: Decimal
    bersih: Decimal
    per_kota: dict[str, int]


def fact_rows(warehouse: Warehouse, conn: Connection, day: date) -> Iterator[list]:
    """Canonical fact rows of `day` (what the fact checksum digests), sorted by order_id in
    code-point order."""
    return warehouse.partition_rows(conn, fact_pesanan, day)


def summary_rows(warehouse: Warehouse, conn: Connection, day: date) -> Iterator[list]:
    """Canonical summary rows of `day` (what the summary checksum digests), sorted by kota in
    code-point order."""
    return warehouse.partition_rows(conn, summary_harian, day)


def fact_totals(warehouse: Warehouse, conn: Connection, day: date) -> FactTotals:
    """Rows, bruto and bersih of the fact rows of `day` (summed exactly by the database,
    per kota, then here) and the rows per kota."""
    with warehouse.small_sorter(conn):
        groups = conn.execute(text(
            f"SELECT kota, COUNT(*), {warehouse.money_sum('bruto')}, "
            f"{warehouse.money_sum('bersih')} FROM fact_pesanan WHERE order_date = :d "
            "GROUP BY kota"), {"d": warehouse.day_param(day)}).all()
    return FactTotals(
        rows=sum(int(n) for _, n, _, _ in groups),
        bruto=sum((Decimal(str(bruto)) for _, _, bruto, _ in groups), Decimal(0)),
        bersih=sum((Decimal(str(bersih)) for _, _, _, bersih in groups), Decimal(0)),
        per_kota={kota: int(n) for kota, n, _, _ in groups})
