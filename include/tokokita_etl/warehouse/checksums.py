"""Checksums of a date's warehouse rows: SHA-256 over one canonical line per row.

A row's canonical line is the JSON array of its canonical values (as
`Warehouse.partition_rows` gives them: timestamps as `datetime.isoformat()` in the pipeline's
zone, dates as ISO 8601, money with two decimals), written by `json.dumps` without spaces and
with non-ASCII text kept, then a newline. Integer columns are JSON numbers, every other value
is a JSON string. Rows come in the code-point order of their key within the date.

`canonical_line` is the definition. `table_digest` (for a table of up to a million rows a
date, such as the orders' facts) has the database build the lines instead, to the same bytes:
SQLite's `json_array` of the stored text, PostgreSQL's concatenation of each value's text; a
row whose text needs a JSON escape is encoded by `canonical_line`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from datetime import date
from functools import cache
from typing import NamedTuple

from sqlalchemy import Column, Date, DateTime, Integer, Numeric, String, Table
from sqlalchemy.engine import Connection
from sqlalchemy.types import TypeEngine

from tokokita_etl.warehouse.database import Warehouse

FETCH_ROWS = 50_000  # rows per fetch when digesting a date (SQLite)


def canonical_line(row: list) -> str:
    """The canonical text of one row for checksums."""
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


def rows_checksum(rows: Iterable[list]) -> str:
    """SHA-256 over the canonical lines of `rows` (canonical values, in order)."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(canonical_line(row).encode("utf-8"))
    return digest.hexdigest()


def is_json_number(column: Column) -> bool:
    """Whether a column's canonical value is a JSON number (integer columns) or a string."""
    return isinstance(column.type, Integer)


class Digest(NamedTuple):
    """The checksum of a date's rows of a table and how many rows it covered."""

    checksum: str
    rows: int


def table_digest(warehouse: Warehouse, conn: Connection, table: Table, day: date) -> Digest:
    """`rows_checksum` of `warehouse.partition_rows(conn, table, day)` and how many rows it
    covered; streamed through the raw DBAPI cursor."""
    driver = conn.connection.driver_connection
    if warehouse.is_sqlite:
        return _sqlite_digest(warehouse, driver, table, day)
    with driver.cursor() as setup:  # for this transaction only
        setup.execute("SELECT current_setting('enable_sort')")
        (enable_sort,) = setup.fetchone()
        # enable_sort: right after a load the table has no statistics yet, and the
        # planner's guess of a few rows picks a bitmap scan + sort of the whole date
        # over the (order_date, order_id) index that yields the order directly
        setup.execute("SELECT set_config('TimeZone', %s, true), "
                      "set_config('DateStyle', 'ISO, YMD', true), "
                      "set_config('enable_sort', 'off', true)", (warehouse.tz.key,))
    digest = Digest(*_pg_digest(warehouse, driver, table, day))
    with driver.cursor() as setup:
        # as it was for the transaction's next statements: with sorting off the planner
        # costs any sort as prohibitive, and the server JIT-compiled validate's sorted
        # 20-row summary query (40-100 ms a run)
        setup.execute("SELECT set_config('enable_sort', %s, true)", (enable_sort,))
    return digest


def _sqlite_digest(warehouse: Warehouse, driver: sqlite3.Connection, table: Table,
                   day: date) -> Digest:
    """SQLite writes each canonical line itself (`json_array` of the stored canonical text and
    integers)."""
    digest = hashlib.sha256()
    count = 0
    cursor = driver.cursor()
    cursor.arraysize = FETCH_ROWS
    values = ", ".join(c.name for c in table.columns)
    cursor.execute(f"SELECT json_array({values}) FROM {table.name} "
                   f"WHERE {table.info['partition']} = ? ORDER BY {warehouse.key_order(table)}",
                   (day.isoformat(),))
    try:
        while rows := cursor.fetchmany(FETCH_ROWS):
            lines = [row[0] for row in rows]
            lines.append("")
            joined = "\n".join(lines)
            # json_array's output is valid JSON, so any escape shows as a backslash: only
            # such lines are re-encoded, to `canonical_line`'s exact escapes
            if "\\" in joined:
                joined = "\n".join(_canonical_json(line) if "\\" in line else line
                                   for line in lines)
            digest.update(joined.encode("utf-8"))
            count += len(rows)
    finally:
        cursor.close()
    return Digest(digest.hexdigest(), count)


def _canonical_json(line: str) -> str:
    """A JSON array line as `canonical_line` writes it (its escapes), without the newline."""
    return canonical_line(json.loads(line))[:-1]


def _pg_digest(warehouse: Warehouse, driver, table: Table, day: date) -> tuple[str, int]:
    """PostgreSQL writes each canonical line itself and streams them with COPY (one line a
    row, hashed as it comes: 1M rows 2.7 -> 2.4 s against fetching them as text values). A
    row with a value JSON must escape comes as ESCAPED_ROW and its values' JSON, and is
    encoded here."""
    digest = hashlib.sha256()
    count = 0
    with driver.cursor() as cursor, \
            cursor.copy(f"COPY ({_pg_rows_sql(warehouse, table)}) TO STDOUT (ENCODING 'UTF8')",
                        (day,)) as copy:
        for line in copy:
            if line[0] == ESCAPED_ROW:
                line = canonical_line(_copy_text_json(line)).encode("utf-8")
            digest.update(line)
            count += 1
    return digest.hexdigest(), count


#: the first byte of a COPY line that holds a row's values as PostgreSQL's JSON (a canonical
#: line starts with "[")
ESCAPED_ROW = ord("!")


def _copy_text_json(line: memoryview) -> list:
    """The values of an ESCAPED_ROW line of COPY's text format. JSON text holds no control
    character, so the only escape COPY added is a doubled backslash."""
    return json.loads(bytes(line[1:]).rstrip(b"\n").replace(b"\\\\", b"\\"))


@cache
def _pg_dialect():
    """SQLAlchemy's PostgreSQL dialect, imported on first use (an SQLite run never needs it)."""
    from sqlalchemy.dialects import postgresql

    return postgresql.dialect()


def _pg_rows_sql(warehouse: Warehouse, table: Table) -> str:
    """PostgreSQL: the rows of `table` of one date, each as its canonical line without the newline
    or, where a value needs a JSON escape, as ESCAPED_ROW and the JSON array of its canonical
    values (which `canonical_line` writes again, with Python's escapes)."""
    columns = list(table.columns)
    kinds = {c.name: c.type.dialect_impl(_pg_dialect()) for c in columns}
    stamps = [c.name for c in columns if isinstance(kinds[c.name], DateTime)]
    texts = [c.name for c in columns if isinstance(kinds[c.name], String)]
    values = {c.name: _pg_value(c.name, kinds[c.name]) for c in columns}
    source = ("FROM (SELECT f.*" + "".join(f", f.{c}::text AS {c}_text" for c in stamps)
              + f" FROM {table.name} f WHERE f.{table.info['partition']} = %s) s")
    order = f"ORDER BY {warehouse.key_order(table, qualifier='s.')}"
    # the other columns' text is digits, dates and timestamps: never escaped in JSON, nor in
    # COPY's text format, which escapes a backslash and control characters
    needs_escape = f"({' || '.join(f's.{c}' for c in texts)}) ~ '[\\x01-\\x1f\"\\\\]'"
    escaped = (f"{_sql_text(chr(ESCAPED_ROW))} || "
               f"json_build_array({', '.join(values[c.name] for c in columns)})::text")
    return (f"SELECT CASE WHEN {needs_escape} THEN {escaped} "
            f"ELSE {_pg_json_array(columns, values)} END {source} {order}")


def _pg_value(name: str, kind: TypeEngine) -> str:
    """PostgreSQL: the canonical text of column `name` of row `s` (integers as they are)."""
    if isinstance(kind, DateTime):
        return _pg_timestamp_text(f"s.{name}_text")
    if isinstance(kind, Date | Numeric):
        return f"s.{name}::text"
    return f"s.{name}"


def _pg_timestamp_text(stamp: str) -> str:
    """`datetime.isoformat()` of a timestamptz from its text `stamp`."""
    # with the session's TimeZone the pipeline zone (set by table_digest), the text is
    # `2026-11-02 14:05:00+07`: `T` and `:00` make it `datetime.isoformat()`; other
    # shapes (fractions, which PostgreSQL trims, offsets with minutes) take the long way
    offset = f"substring({stamp} FROM '[+-][0-9:]+$')"
    long_way = (f"substr({stamp}, 1, 10) || 'T' || substr({stamp}, 12, 8) "
                f"|| coalesce('.' || rpad(substring({stamp} FROM '\\.([0-9]+)'), 6, '0'), '') "
                f"|| CASE WHEN length({offset}) = 3 THEN {offset} || ':00' ELSE {offset} END")
    return (f"CASE WHEN length({stamp}) = 22 THEN overlay({stamp} PLACING 'T' FROM 11 FOR 1) "
            f"|| ':00' ELSE {long_way} END")


def _pg_json_array(columns: list[Column], values: dict[str, str]) -> str:
    """A concatenation that writes `canonical_line` of the values (no escapes needed), without
    its newline: strings in quotes, JSON numbers bare."""
    parts: list[str] = []  # SQL expressions to concatenate
    literal = "["  # JSON text not yet added to `parts`
    for i, column in enumerate(columns):
        quote = "" if is_json_number(column) else '"'
        literal += ("," if i else "") + quote
        parts += [_sql_text(literal), values[column.name]]
        literal = quote
    parts.append(_sql_text(literal + "]"))
    return " || ".join(parts)


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
