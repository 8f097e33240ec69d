"""Loading rows in bulk into the warehouse: COPY on PostgreSQL (binary into the warehouse's own
tables, `pg_copy`), multi-row INSERTs on SQLite; `Warehouse` has these methods
(`BulkLoad`)."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
import pyarrow.csv as pacsv
from sqlalchemy import BigInteger, Column, Date, DateTime, Integer, Numeric, String, Table
from sqlalchemy.engine import Connection

from tokokita_etl.errors import WarehouseError
from tokokita_etl.warehouse.schema import metadata

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: rows one SQLite INSERT binds (a multi-row VALUES): executemany's step and reset per row
#: were a third of a stage insert (288k rows: 0.84-1.0 s -> 0.53-0.57 s at 200 rows a
#: statement; 22,727 rows a statement, the most its 250,000 variables allow, took 1.04 s)
SQLITE_ROWS_PER_INSERT = 256

T = TypeVar("T")


def read_ahead(items: Iterable[T]) -> Iterator[T]:
    """`items` in order, each one produced on a second thread while the caller works on the
    one before (SQLite inserts with the GIL released, so reading and converting the next
    batch overlaps them)."""
    iterator = iter(items)
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(next, iterator, _END)
        while (item := pending.result()) is not _END:
            pending = pool.submit(next, iterator, _END)
            yield item


_END = object()


def sqlite_rows_per_insert(connection: sqlite3.Connection, width: int) -> int:
    """Rows one multi-row INSERT of `width` values a row binds on `connection`:
    `SQLITE_ROWS_PER_INSERT`, fewer when the connection allows fewer variables."""
    return max(1, min(SQLITE_ROWS_PER_INSERT,
                      connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))


def _sql_text(value: str) -> str:
    """`value` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _python_values(column: pa.Array) -> Sequence:
    """`column`'s values as Python objects. A dictionary column's come from its dictionary,
    each distinct value made once and shared by its rows (a new date's 960,005 fact rows:
    2.1-2.7 -> 1.4-1.5 CPU seconds to turn into Python values, with their kota, produk and
    money columns read as dictionaries)."""
    if not pa.types.is_dictionary(column.type) or column.null_count or len(column) < 2:
        return column.to_pylist()
    return itemgetter(*column.indices.to_pylist())(column.dictionary.to_pylist())


def _row_major(batch: pa.RecordBatch, columns: list[str]) -> tuple[list, int]:
    """The values of `batch`'s `columns` as Python objects, row after row, and its rows.
    Each column fills every `width`-th place by one slice assignment (half the time of
    zipping rows into tuples and flattening them)."""
    width = len(columns)
    values: list = [None] * (batch.num_rows * width)
    for place, column in enumerate(columns):
        values[place::width] = _python_values(batch.column(column))
    return values, batch.num_rows


class BulkLoad:
    """The bulk loading of a `Warehouse` (its dialect and engine)."""

    is_sqlite: bool
    engine: Engine

    def bulk_insert(self, conn: Connection, table: str, columns: list[str],
                    batches: Iterable[pa.RecordBatch], *,
                    constants: Mapping[str, str] | None = None) -> int:
        """Insert Arrow batches' `columns` into `table` fast: COPY on PostgreSQL; on SQLite
        INSERTs of `SQLITE_ROWS_PER_INSERT` rows each (fewer if SQLite allows fewer
        variables). `constants`: columns absent from the batches whose text is the same in
        every row; SQLite's statement holds each as a literal (bound on every row, a fact
        table's order_date cost about a tenth of a 1M-row insert), COPY gets it as a column
        of each batch."""
        driver = conn.connection.driver_connection
        constants = dict(constants or {})
        count = 0
        if self.is_sqlite:
            width = len(columns)
            row = f"({', '.join(['?'] * width + [_sql_text(v) for v in constants.values()])})"
            head = f"INSERT INTO {table} ({', '.join([*columns, *constants])}) VALUES "
            per_insert = sqlite_rows_per_insert(driver, width)
            many_rows, step = head + ", ".join([row] * per_insert), per_insert * width
            cursor = driver.cursor()
            for values, rows in read_ahead(_row_major(batch, columns) for batch in batches):
                whole = rows // per_insert * step
                for start in range(0, whole, step):
                    cursor.execute(many_rows, values[start:start + step])
                cursor.executemany(head + row, (values[start:start + width]
                                                for start in range(whole, len(values), width)))
                count += rows
            return count
        if table in metadata.tables:
            return self._copy_binary(driver, metadata.tables[table], columns, batches, constants)
        copy_sql = (f"COPY {table} ({', '.join([*columns, *constants])}) "
                    "FROM STDIN WITH (FORMAT csv)")
        with driver.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for batch in batches:
                rows = batch.select(columns)
                for name, value in constants.items():
                    rows = rows.append_column(name, pa.repeat(value, rows.num_rows))
                buffer = io.BytesIO()
                pacsv.write_csv(rows, buffer, pacsv.WriteOptions(include_header=False))
                copy.write(buffer.getvalue())
                count += batch.num_rows
        return count

    def _copy_binary(self, driver, table: Table, columns: list[str],
                     batches: Iterable[pa.RecordBatch], constants: dict[str, str]) -> int:
        """`bulk_insert` into one of the warehouse's own tables on PostgreSQL: COPY in binary,
        each value in its column's type (the server parses no text; `pg_copy`)."""
        from tokokita_etl.warehouse import pg_copy

        # the constants first: with the row's field count they are one piece of every row
        fields = [self._copy_field(table.c[name]) for name in [*constants, *columns]]
        names = ", ".join(field.name for field in fields)
        count = 0
        with driver.cursor() as cursor, \
                cursor.copy(f"COPY {table.name} ({names}) FROM STDIN (FORMAT binary)") as copy:
            copy.write(pg_copy.SIGNATURE)
            for batch in batches:
                try:
                    encoded = pg_copy.encode_rows(batch, fields, constants)
                except ValueError as exc:
                    raise WarehouseError(f"{table.name}: {exc}") from None
                copy.write(encoded)
                count += batch.num_rows
            copy.write(pg_copy.TRAILER)
        return count

    def _copy_field(self, column: Column):
        """How binary COPY sends `column` (a `pg_copy.Field`)."""
        from tokokita_etl.warehouse.pg_copy import Field

        kind = column.type.dialect_impl(self.engine.dialect)
        if isinstance(kind, String):
            return Field(column.name, "text")
        if isinstance(kind, BigInteger):
            return Field(column.name, "int8")
        if isinstance(kind, Integer):
            return Field(column.name, "int4")
        if isinstance(kind, DateTime) and kind.timezone:
            return Field(column.name, "timestamptz")
        if isinstance(kind, Date):
            return Field(column.name, "date")
        if isinstance(kind, Numeric):
            return Field(column.name, "numeric", kind.precision, kind.scale)
        raise WarehouseError(f"{column.table.name}.{column.name}: no binary COPY for {kind}")

    def insert_new_keys(self, conn: Connection, table: str, columns: list[str],
                        batches: Iterable[pa.RecordBatch], *,
                        constants: Mapping[str, str] | None = None) -> int | None:
        """`bulk_insert` of rows whose keys must all be new to `table`, under a savepoint:
        the rows inserted, or None, with the savepoint rolled back, when the table holds one
        of the keys already."""
        if self.is_sqlite:
            duplicate_key: type[Exception] = sqlite3.IntegrityError
        else:
            from psycopg.errors import UniqueViolation as duplicate_key
        try:
            with conn.begin_nested():
                return self.bulk_insert(conn, table, columns, batches, constants=constants)
        except duplicate_key as exc:
            if self.is_sqlite and exc.sqlite_errorcode != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
                raise  # a NOT NULL or CHECK failure is no key held already
            return None
