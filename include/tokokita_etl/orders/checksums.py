"""The orders' checksums of a date as the warehouse holds it: its fact rows' (built by the
database, `warehouse.checksums.table_digest`) and its summary rows'."""

from __future__ import annotations

from datetime import date

from sqlalchemy.engine import Connection

from tokokita_etl.orders.schema import fact_pesanan, summary_rows
from tokokita_etl.warehouse.checksums import Digest, rows_checksum, table_digest
from tokokita_etl.warehouse.database import Warehouse


def fact_digest(warehouse: Warehouse, conn: Connection, day: date) -> Digest:
    """The checksum of the fact rows of `day` and how many rows it covered."""
    return table_digest(warehouse, conn, fact_pesanan, day)


def held_checksums(warehouse: Warehouse, day: date) -> dict[str, str]:
    """The checksums of `day` (`fact_D`, `summary_D`, as a success records them) of the rows
    the warehouse holds now."""
    with warehouse.begin(label="warehouse", read_only=True) as conn:
        fact = fact_digest(warehouse, conn, day)
        summary = list(summary_rows(warehouse, conn, day))
    return {f"fact_{day}": fact.checksum, f"summary_{day}": rows_checksum(summary)}
