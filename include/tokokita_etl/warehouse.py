"""The warehouse: schema, connections and the few dialect differences (SQLite, PostgreSQL)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import NamedTuple
from zoneinfo import ZoneInfo

import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
from sqlalchemy import (
    TIMESTAMP,
    BigInteger,
    Column,
    Date,
    Index,
    Integer,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    Table,
    Text,
    create_engine,
    event,
    text,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from tokokita_etl.contract import (
    FACT_COLUMNS,
    QUARANTINE_COLUMNS,
    REQUIRED_COLUMNS,
    SUMMARY_COLUMNS,
)
from tokokita_etl.errors import ConfigError, WarehouseError

FACT_BATCH = 50_000  # rows per fetch when digesting a date
SQLITE_CACHE_KB = 128 * 1024

# SQLite has no exact decimal or zoned timestamp: money is stored as text with exactly two
# decimals (summed as integer cents), dates and timestamps as ISO 8601 text.
Money = Text().with_variant(Numeric(18, 2), "postgresql")
# a day's sum of NUMERIC(18,2) amounts can exceed NUMERIC(18,2): summary columns are wider
SummaryMoney = Text().with_variant(Numeric(24, 2), "postgresql")
Day = Text().with_variant(Date(), "postgresql")
Timestamp = Text().with_variant(TIMESTAMP(timezone=True), "postgresql")

metadata = MetaData()
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
)
# one date's rows in order_id code-point order straight from the index: the checksum's ORDER BY
# needs no sort (the "opclass" slot carries the collation on PostgreSQL)
Index("ix_fact_pesanan_date_order", fact_pesanan.c.order_date, fact_pesanan.c.order_id,
      postgresql_ops={"order_id": 'COLLATE "C"'})
summary_harian = Table(
    "summary_harian", metadata,
    Column("order_date", Day, nullable=False),
    Column("kota", Text, nullable=False),
    Column("jumlah_pesanan", BigInteger, nullable=False),
    Column("total_qty", BigInteger, nullable=False),
    Column("bruto", SummaryMoney, nullable=False),
    Column("bersih", SummaryMoney, nullable=False),
    PrimaryKeyConstraint("order_date", "kota"),
)
karantina = Table(
    "karantina", metadata,
    Column("order_date", Day, nullable=False),
    Column("line", BigInteger, nullable=False),
    Column("reason", Text, nullable=False),
    *[Column(name, Text) for name in REQUIRED_COLUMNS],
    Column("raw", Text),
    PrimaryKeyConstraint("order_date", "line"),
)


class Warehouse:
    """One warehouse URL: connections, schema and dialect-specific SQL fragments."""

    def __init__(self, url: str, tz: str = "Asia/Jakarta") -> None:
        try:
            self.url = make_url(url)
        except ArgumentError:
            raise ConfigError(f"warehouse_url: not a valid SQLAlchemy URL: {url!r}") from None
        self.tz = ZoneInfo(tz)
        self.dialect = self.url.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise ConfigError(
                f"warehouse_url: backend {self.dialect!r} is not supported (sqlite, postgresql)"
            )
        self.display_url = self.url.render_as_string(hide_password=True)
        self._engine: Engine | None = None

    @property
    def is_sqlite(self) -> bool:
        """Whether this is the embedded SQLite backend."""
        return self.dialect == "sqlite"

    @property
    def engine(self) -> Engine:
        """The engine, made on first use (no pool: every stage is a short-lived process)."""
        if self._engine is None:
            if self.is_sqlite:
                database = self.url.database
                if database and database != ":memory:":
                    Path(database).parent.mkdir(parents=True, exist_ok=True)
                engine = create_engine(self.url, poolclass=NullPool,
                                       connect_args={"timeout": 120})

                @event.listens_for(engine, "connect")
                def _autocommit_driver(dbapi_connection, _record):
                    dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
                    # a page cache that holds a large date's index pages (the default 2 MB
                    # made loads and digests re-read pages); grows only as pages are used
                    dbapi_connection.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KB}")

                @event.listens_for(engine, "begin")
                def _begin_immediate(conn):
                    conn.exec_driver_sql("BEGIN IMMEDIATE")  # one writer at a time, no upgrade

            else:
                engine = create_engine(self.url, poolclass=NullPool)
            self._engine = engine
        return self._engine

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        """One transaction; connection failures become a WarehouseError naming the URL."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except (SQLAlchemyError, sqlite3.Error, psycopg.Error) as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise WarehouseError(f"warehouse {self.display_url}: {reason}") from None

    def ensure_schema(self) -> None:
        """Create the warehouse tables when missing."""
        with self.begin() as conn:
            metadata.create_all(conn, checkfirst=True)

    def day_param(self, day: date) -> date | str:
        """The bound value for an `order_date` comparison."""
        return day.isoformat() if self.is_sqlite else day

    def money_sum(self, column: str) -> str:
        """An exact SUM over a money column, as the column's own type."""
        if self.is_sqlite:
            # rupiah and cents summed apart, so 64-bit integers hold far more than a cents sum
            rupiah = f"SUM(CAST(substr({column}, 1, length({column}) - 3) AS INTEGER))"
            cents = f"SUM(CAST(substr({column}, -2) AS INTEGER))"
            return f"printf('%d.%02d', {rupiah} + {cents} / 100, {cents} % 100)"
        return f"SUM({column})"

    @property
    def byte_order(self) -> str:
        """Collation clause that sorts by code point on both backends."""
        return "" if self.is_sqlite else ' COLLATE "C"'

    def create_stage_table(self, conn: Connection, name: str, columns: Iterable[str],
                           integers: Iterable[str] = ("line",)) -> None:
        """A temporary staging table (text columns but `integers`) living until commit."""
        integers = set(integers)
        cols = ", ".join(f"{c} {'BIGINT' if c in integers else 'TEXT'}" for c in columns)
        if self.is_sqlite:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{name}")
            conn.exec_driver_sql(f"CREATE TEMP TABLE {name} ({cols})")
        else:
            conn.exec_driver_sql(f"CREATE TEMP TABLE {name} ({cols}) ON COMMIT DROP")

    def bulk_insert(self, conn: Connection, table: str, columns: list[str],
                    batches: Iterable[pa.RecordBatch]) -> int:
        """Insert Arrow batches into `table` fast: COPY on PostgreSQL, executemany on SQLite."""
        driver = conn.connection.driver_connection
        count = 0
        if self.is_sqlite:
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            cursor = driver.cursor()
            for batch in batches:
                cols = [batch.column(c).to_pylist() for c in columns]
                cursor.executemany(sql, zip(*cols, strict=True))
                count += batch.num_rows
            return count
        copy_sql = f"COPY {table} ({', '.join(columns)}) FROM STDIN WITH (FORMAT csv)"
        with driver.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for batch in batches:
                buffer = io.BytesIO()
                pacsv.write_csv(batch.select(columns), buffer,
                                pacsv.WriteOptions(include_header=False))
                copy.write(buffer.getvalue())
                count += batch.num_rows
        return count

    def _render(self, value: object) -> object:
        if isinstance(value, datetime):
            return value.astimezone(self.tz).isoformat()
        if isinstance(value, date):
            return value.isoformat()
        if isinstance(value, Decimal):
            return f"{value:.2f}"
        return value

    def fact_rows(self, conn: Connection, day: date) -> Iterator[list]:
        """Canonical fact rows of `day`, sorted by order_id in code-point order."""
        sql = (f"SELECT {', '.join(FACT_COLUMNS)} FROM fact_pesanan WHERE order_date = :d "
               f"ORDER BY order_id{self.byte_order}")
        yield from self._canonical(conn, sql, day)

    def summary_rows(self, conn: Connection, day: date) -> Iterator[list]:
        """Canonical summary rows of `day`, sorted by kota in code-point order."""
        sql = (f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM summary_harian WHERE order_date = :d "
               f"ORDER BY kota{self.byte_order}")
        yield from self._canonical(conn, sql, day)

    def _canonical(self, conn: Connection, sql: str, day: date) -> Iterator[list]:
        result = conn.execution_options(stream_results=True, yield_per=20_000).execute(
            text(sql), {"d": self.day_param(day)})
        render = self._render
        for partition in result.partitions():
            for row in partition:
                yield [render(v) for v in row]

    def _fact_text_sql(self, shape: str) -> str:
        """PostgreSQL: the fact rows of one date as whole canonical lines ("lines", NULL where
        a value needs a JSON escape) or, for those rows only, as canonical values ("escaped")."""
        # with the session's TimeZone the pipeline zone (set by fact_digest), order_ts::text is
        # `2026-11-02 14:05:00+07`: `T` and `:00` make it `datetime.isoformat()`; other
        # shapes (fractions, which PostgreSQL trims, offsets with minutes) take the long way
        long_way = ("substr(s.t, 1, 10) || 'T' || substr(s.t, 12, 8) "
                    "|| coalesce('.' || rpad(substring(s.t FROM '\\.([0-9]+)'), 6, '0'), '') "
                    "|| CASE WHEN length(substring(s.t FROM '[+-][0-9:]+$')) = 3 "
                    "THEN substring(s.t FROM '[+-][0-9:]+$') || ':00' "
                    "ELSE substring(s.t FROM '[+-][0-9:]+$') END")
        columns = {
            **{c: f"s.{c}" for c in FACT_COLUMNS},
            "order_date": "s.order_date::text",
            "order_ts": f"CASE WHEN length(s.t) = 22 THEN overlay(s.t PLACING 'T' FROM 11 FOR 1) "
                        f"|| ':00' ELSE {long_way} END",
            **{c: f"s.{c}::text" for c in ("harga_satuan", "diskon", "bruto", "bersih")},
        }
        rendered = [columns[c] for c in FACT_COLUMNS]
        source = ("FROM (SELECT f.*, f.order_ts::text AS t FROM fact_pesanan f "
                  "WHERE f.order_date = %s) s")
        order = f"ORDER BY s.order_id{self.byte_order}"
        if shape == "lines":
            # the whole canonical line, one value per row, when no text value needs a JSON
            # escape (NULL otherwise: such rows come from shape "escaped", in the same order)
            line = " || ".join(
                ["'[\"'"] + [part for i, expr in enumerate(rendered) for part in (
                    ([] if i == 0 else ["',\"'" if i == 7 else ("'\",'" if i == 6 else "'\",\"'")])
                    + [expr])] + ["'\"]'"])
            return f"SELECT CASE WHEN {_PG_NEEDS_ESCAPE} THEN NULL ELSE {line} END {source} {order}"
        return f"SELECT {', '.join(rendered)} {source} WHERE {_PG_NEEDS_ESCAPE} {order}"

    def fact_digest(self, conn: Connection, day: date) -> FactDigest:
        """SHA-256 of the canonical fact rows of `day` (as `RowDigest` over `fact_rows`), how
        many rows it covered and how many per kota; streamed through the raw DBAPI cursor."""
        driver = conn.connection.driver_connection
        if self.is_sqlite:
            return self._sqlite_fact_digest(driver, day)
        with driver.cursor() as setup:  # for this transaction only
            # enable_sort: right after a load the table has no statistics yet, and the
            # planner's guess of a few rows picks a bitmap scan + sort of the whole date
            # over the (order_date, order_id) index that yields the order directly
            setup.execute("SELECT set_config('TimeZone', %s, true), "
                          "set_config('DateStyle', 'ISO, YMD', true), "
                          "set_config('enable_sort', 'off', true)", (self.tz.key,))
        checksum, count = self._pg_fact_digest(driver, day)
        per_kota = dict(conn.execute(text(
            "SELECT kota, COUNT(*) FROM fact_pesanan WHERE order_date = :d GROUP BY kota"),
            {"d": day}).all())
        return FactDigest(checksum, count, per_kota)

    def _sqlite_fact_digest(self, driver: sqlite3.Connection, day: date) -> FactDigest:
        """SQLite writes each canonical line itself (`json_array` of the stored canonical text);
        the kota of each row is counted in the same pass."""
        digest = hashlib.sha256()
        per_kota: Counter[str] = Counter()
        count = 0
        cursor = driver.cursor()
        cursor.arraysize = FACT_BATCH
        cursor.execute(f"SELECT json_array({', '.join(FACT_COLUMNS)}), kota FROM fact_pesanan "
                       "WHERE order_date = ? ORDER BY order_id", (day.isoformat(),))
        try:
            while rows := cursor.fetchmany(FACT_BATCH):
                lines = [row[0] for row in rows]
                lines.append("")
                joined = "\n".join(lines)
                # json_array's output is valid JSON, so any escape shows as a backslash: only
                # such lines are re-encoded, to `canonical_line`'s exact escapes
                if "\\" in joined:
                    joined = "\n".join(_canonical_json(line) if "\\" in line else line
                                        for line in lines)
                digest.update(joined.encode("utf-8"))
                per_kota.update(row[1] for row in rows)
                count += len(rows)
        finally:
            cursor.close()
        return FactDigest(digest.hexdigest(), count, dict(per_kota))

    def _pg_fact_digest(self, driver, day: date) -> tuple[str, int]:
        """PostgreSQL builds each canonical line itself (one text value per row instead of
        eleven to convert); the rare rows with a value JSON must escape come as values from a
        second cursor, opened on first need, in the same order, and are encoded here."""
        digest = hashlib.sha256()
        count = 0
        lines = driver.cursor(name="tokokita_fact_lines")
        lines.itersize = FACT_BATCH
        lines.execute(self._fact_text_sql("lines"), (day,))
        escaped = None

        def escaped_rows() -> Iterator[tuple]:
            cursor = driver.cursor(name="tokokita_fact_escaped")
            cursor.itersize = FACT_BATCH
            cursor.execute(self._fact_text_sql("escaped"), (day,))
            try:
                while rows := cursor.fetchmany(FACT_BATCH):
                    yield from rows
            finally:
                cursor.close()

        try:
            while rows := lines.fetchmany(FACT_BATCH):
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

    def fact_totals(self, conn: Connection, day: date) -> tuple[int, Decimal, Decimal]:
        """Rows, bruto and bersih of the fact rows of `day`, summed exactly by the database."""
        n, bruto, bersih = conn.execute(text(
            f"SELECT COUNT(*), {self.money_sum('bruto')}, {self.money_sum('bersih')} "
            "FROM fact_pesanan WHERE order_date = :d"), {"d": self.day_param(day)}).one()
        return int(n), Decimal(str(bruto or 0)), Decimal(str(bersih or 0))


def canonical_line(row: list) -> str:
    """The canonical text of one row for checksums."""
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


def _canonical_json(line: str) -> str:
    """A JSON array line as `canonical_line` writes it (its escapes), without the newline."""
    return canonical_line(json.loads(line))[:-1]


# PostgreSQL: does a fact row's text hold a character JSON escapes (`"`, backslash, control)?
# (the other columns are digits, dates and timestamps)
_PG_NEEDS_ESCAPE = ("(s.order_id || s.customer_id || s.kota || s.produk) "
                    "~ '[\\x01-\\x1f\"\\\\]'")

class FactDigest(NamedTuple):
    """The fact checksum of a date, the rows it covered, and those rows per kota."""

    checksum: str
    rows: int
    per_kota: dict[str, int]


class RowDigest:
    """SHA-256 over canonical lines."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, row: list) -> None:
        """Add one row."""
        self._hash.update(canonical_line(row).encode("utf-8"))

    def hexdigest(self) -> str:
        """The checksum."""
        return self._hash.hexdigest()


QUARANTINE_INSERT_COLUMNS = list(QUARANTINE_COLUMNS)
