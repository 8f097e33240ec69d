"""Checksums of a date's warehouse rows: SHA-256 over one canonical line per row.

A row's canonical line is the JSON array of its canonical values (as `Warehouse.fact_rows` and
`Warehouse.summary_rows` give them: timestamps as `datetime.isoformat()` in the pipeline's
zone, dates as ISO 8601, money with two decimals), written by `json.dumps` without spaces and
with non-ASCII text kept, then a newline. Integer columns are JSON numbers, every other value
is a JSON string. Rows come in the code-point order of their key within the date.

`canonical_line` is the definition. The fact checksum (up to a million rows a date) is built
by the database instead, to the same bytes: SQLite's `json_array` of the stored text,
PostgreSQL's concatenation of each value's text; a row whose text needs a JSON escape is
encoded by `canonical_line`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import date
from functools import cache
from typing import NamedTuple

from sqlalchemy import Column, Date, DateTime, Integer, Numeric, String
from sqlalchemy.engine import Connection
from sqlalchemy.types import TypeEngine

from tokokita_etl.errors import WarehouseError
from tokokita_etl.warehouse import Warehouse, fact_pesanan

FETCH_ROWS = 50_000  # rows per fetch when digesting a date


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


class FactDigest(NamedTuple):
    """The fact checksum of a date and the rows it covered."""

    checksum: str
    rows: int


def fact_digest(warehouse: Warehouse, conn: Connection, day: date) -> FactDigest:
    """`rows_checksum` of `warehouse.fact_rows(conn, day)` and how many rows it covered;
    streamed through the raw DBAPI cursor."""
    driver = conn.connection.driver_connection
    if warehouse.is_sqlite:
        return _sqlite_fact_digest(warehouse, driver, day)
    with driver.cursor() as setup:  # for this transaction only
        # enable_sort: right after a load the table has no statistics yet, and the
        # planner's guess of a few rows picks a bitmap scan + sort of the whole date
        # over the (order_date, order_id) index that yields the order directly
        setup.execute("SELECT set_config('TimeZone', %s, true), "
                      "set_config('DateStyle', 'ISO, YMD', true), "
                      "set_config('enable_sort', 'off', true)", (warehouse.tz.key,))
    return FactDigest(*_pg_fact_digest(warehouse, driver, day))


def _sqlite_fact_digest(warehouse: Warehouse, driver: sqlite3.Connection,
                        day: date) -> FactDigest:
    """SQLite writes each canonical line itself (`json_array` of the stored canonical text and
    integers)."""
    digest = hashlib.sha256()
    count = 0
    cursor = driver.cursor()
    cursor.arraysize = FETCH_ROWS
    values = ", ".join(c.name for c in fact_pesanan.columns)
    cursor.execute(f"SELECT json_array({values}) FROM fact_pesanan "
                   f"WHERE order_date = ? ORDER BY {warehouse.key_order(fact_pesanan)}",
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
    return FactDigest(digest.hexdigest(), count)


def _canonical_json(line: str) -> str:
    """A JSON array line as `canonical_line` writes it (its escapes), without the newline."""
    return canonical_line(json.loads(line))[:-1]


def _pg_fact_digest(warehouse: Warehouse, driver, day: date) -> tuple[str, int]:
    """PostgreSQL builds each canonical line itself (one text value per row instead of
    eleven to convert); the rare rows with a value JSON must escape come as values from a
    second cursor, opened on first need, in the same order, and are encoded here."""
    digest = hashlib.sha256()
    count = 0
    lines = driver.cursor(name="tokokita_fact_lines")
    lines.itersize = FETCH_ROWS
    lines.execute(_pg_fact_sql(warehouse, "lines"), (day,))
    escaped = None

    def escaped_rows() -> Iterator[tuple]:
        cursor = driver.cursor(name="tokokita_fact_escaped")
        cursor.itersize = FETCH_ROWS
        cursor.execute(_pg_fact_sql(warehouse, "escaped"), (day,))
        try:
            while rows := cursor.fetchmany(FETCH_ROWS):
                yield from rows
        finally:
            cursor.close()

    try:
        while rows := lines.fetchmany(FETCH_ROWS):
            parts = [row[0] for row in rows]
            if None in parts:
                escaped = escaped or escaped_rows()
                parts = [part if part is not None else canonical_line(list(next(escaped)))[:-1]
                         for part in parts]
            parts.append("")
            digest.update("\n".join(parts).encode("utf-8"))
            count += len(rows)
        if escaped is not None and next(escaped, None) is not None:
            raise WarehouseError("fact checksum: escaped rows out of step with the lines")
    finally:
        lines.close()
        if escaped is not None:
            escaped.close()
    return digest.hexdigest(), count


@cache
def _pg_dialect():
    """SQLAlchemy's PostgreSQL dialect, imported on first use (an SQLite run never needs it)."""
    from sqlalchemy.dialects import postgresql

    return postgresql.dialect()


def _pg_fact_sql(warehouse: Warehouse, shape: str) -> str:
    """PostgreSQL: the fact rows of one date as whole canonical lines ("lines", NULL where a
    value needs a JSON escape) or, for those rows only, as canonical values ("escaped")."""
    columns = list(fact_pesanan.columns)
    kinds = {c.name: c.type.dialect_impl(_pg_dialect()) for c in columns}
    stamps = [c.name for c in columns if isinstance(kinds[c.name], DateTime)]
    texts = [c.name for c in columns if isinstance(kinds[c.name], String)]
    values = {c.name: _pg_value(c.name, kinds[c.name]) for c in columns}
    source = ("FROM (SELECT f.*" + "".join(f", f.{c}::text AS {c}_text" for c in stamps)
              + " FROM fact_pesanan f WHERE f.order_date = %s) s")
    order = f"ORDER BY {warehouse.key_order(fact_pesanan, qualifier='s.')}"
    # the other columns' text is digits, dates and timestamps: never escaped in JSON
    needs_escape = f"({' || '.join(f's.{c}' for c in texts)}) ~ '[\\x01-\\x1f\"\\\\]'"
    if shape == "lines":
        return (f"SELECT CASE WHEN {needs_escape} THEN NULL "
                f"ELSE {_pg_json_array(columns, values)} END {source} {order}")
    return (f"SELECT {', '.join(values[c.name] for c in columns)} {source} "
            f"WHERE {needs_escape} {order}")


def _pg_value(name: str, kind: TypeEngine) -> str:
    """PostgreSQL: the canonical text of column `name` of row `s` (integers as they are)."""
    if isinstance(kind, DateTime):
        return _pg_timestamp_text(f"s.{name}_text")
    if isinstance(kind, Date | Numeric):
        return f"s.{name}::text"
    return f"s.{name}"


def _pg_timestamp_text(stamp: str) -> str:
    """`datetime.isoformat()` of a timestamptz from its text `stamp`."""
    # with the session's TimeZone the pipeline zone (set by fact_digest), the text is
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
