"""The warehouse: schema, connections and the few dialect differences (SQLite, PostgreSQL).

Its column types and tables are in `warehouse.schema`, its bulk loading in `warehouse.bulk`.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import sys
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlalchemy import Integer, String, Table, create_engine, event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from tokokita_etl.errors import AccessDeniedError, ConfigError, WarehouseError
from tokokita_etl.masking import mask_query_secrets
from tokokita_etl.settings.model import Settings, default
from tokokita_etl.warehouse.bulk import BulkLoad
from tokokita_etl.warehouse.schema import metadata, warehouse_identity

SQLITE_CACHE_KB = 128 * 1024
SQLITE_SORT_CACHE_KB = 2000  # SQLite's default page cache
#: the PostgreSQL advisory lock key that serialises `ensure_schema` (any fixed 64-bit number)
SCHEMA_LOCK_KEY = 0x746F6B6F6B697461  # "tokokita"


def __getattr__(name: str):
    """The PostgreSQL connection classes (`tokokita_etl.warehouse.pg_connection`), imported with psycopg
    on first use only: an SQLite run never imports psycopg."""
    if name in ("NoAnswerError", "_AnsweredConnection"):
        from tokokita_etl.warehouse import pg_connection

        return getattr(pg_connection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _no_answer_in(exc: BaseException) -> BaseException | None:
    """The deadline error (`pg_connection.NoAnswerError`) behind `exc`: cleanup code that runs
    on the closed connection (closing a cursor, ending a COPY) raises "the connection is
    closed" over it. None when psycopg's connection was never used (an SQLite warehouse)."""
    pg = sys.modules.get("tokokita_etl.warehouse.pg_connection")
    if pg is None:
        return None
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return None
        if isinstance(seen, pg.NoAnswerError):
            return seen
        seen = getattr(seen, "orig", None) or seen.__context__
    return None


def _database_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """The errors a warehouse call turns into a WarehouseError, and the transient ones of
    them; psycopg's only once it is imported (no psycopg error can occur before)."""
    errors: tuple[type[BaseException], ...] = (SQLAlchemyError, sqlite3.Error)
    transient: tuple[type[BaseException], ...] = (OperationalError, sqlite3.OperationalError)
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        errors += (psycopg.Error,)
        transient += (psycopg.OperationalError,)
    return errors, transient


_BILLION = 1_000_000_000
#: what PostgreSQL says when it refuses a login (psycopg gives such errors no SQLSTATE):
#: a configuration error, not an outage
_LOGIN_REFUSED = ("authentication failed", "no password supplied", "no pg_hba.conf entry",
                  "FATAL:  role ")
READ_ONLY = "tokokita_read_only"  # the execution option of `Warehouse.begin(read_only=True)`


class Warehouse(BulkLoad):
    """One warehouse URL: connections, schema and dialect-specific SQL fragments."""

    def __init__(self, url: str, tz: str, *,
                 connect_timeout_s: int = default("db_connect_timeout_s"),
                 statement_timeout_s: int = default("db_statement_timeout_s"),
                 lock_timeout_s: int = default("db_lock_timeout_s"),
                 answer_timeout_s: int = default("db_answer_timeout_s")) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.statement_timeout_s = statement_timeout_s
        self.answer_timeout_s = answer_timeout_s
        self.lock_timeout_s = lock_timeout_s
        try:
            self.url = make_url(url)
        except ArgumentError:
            shown = re.sub(r"://[^@/]*@", "://***@", url)  # never a password in a message
            raise ConfigError(f"warehouse_url: not a valid SQLAlchemy URL: {shown!r}") from None
        self.tz = ZoneInfo(tz)
        self.dialect = self.url.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise ConfigError(
                f"warehouse_url: backend {self.dialect!r} is not supported (sqlite, postgresql)"
            )
        if self.dialect == "sqlite" and self.url.database in (None, "", ":memory:"):
            # each stage (each Airflow task) opens its own connection: a database in memory
            # would be a new, empty one every time
            raise ConfigError(f"warehouse_url: an SQLite warehouse is a file "
                              f"(sqlite:///path/to/file.db), got {url!r}")
        self.display_url = mask_query_secrets(self.url.render_as_string(hide_password=True))
        self._engine: Engine | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Warehouse:
        """The warehouse of `settings`, with its `db_*` timeouts."""
        return cls(settings.warehouse_url, settings.timezone,
                   connect_timeout_s=settings.db_connect_timeout_s,
                   statement_timeout_s=settings.db_statement_timeout_s,
                   lock_timeout_s=settings.db_lock_timeout_s,
                   answer_timeout_s=settings.db_answer_timeout_s)

    def _postgresql_connect_args(self) -> dict[str, object]:
        """connect_timeout, and statement and lock timeouts as server options (added to any
        `options` the URL carries, such as a search_path)."""
        options = " ".join(filter(None, [
            str(self.url.query.get("options", "")),
            f"-c statement_timeout={self.statement_timeout_s * 1000}",
            f"-c lock_timeout={self.lock_timeout_s * 1000}"]))
        return {"connect_timeout": self.connect_timeout_s, "options": options}

    @property
    def is_sqlite(self) -> bool:
        """Whether this is the embedded SQLite backend."""
        return self.dialect == "sqlite"

    @property
    def engine(self) -> Engine:
        """The engine, made on first use (no pool: every stage is a short-lived process)."""
        if self._engine is None:
            if self.is_sqlite:
                Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
                engine = create_engine(self.url, poolclass=NullPool,
                                       connect_args={"timeout": self.lock_timeout_s})

                @event.listens_for(engine, "connect")
                def _autocommit_driver(dbapi_connection, _record):
                    dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
                    # a page cache that holds a large date's index pages (the default 2 MB
                    # made loads and digests re-read pages); grows only as pages are used
                    dbapi_connection.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KB}")

                @event.listens_for(engine, "begin")
                def _begin(conn):
                    # one writer at a time, no upgrade; a read-only transaction takes a shared
                    # lock only, so it reads beside a writer's transaction that has not written
                    read_only = conn.get_execution_options().get(READ_ONLY)
                    conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

            else:
                from tokokita_etl.warehouse.pg_connection import _AnsweredConnection

                engine = create_engine(self.url, poolclass=NullPool,
                                       connect_args=self._postgresql_connect_args())
                # a live server answers every wait of a legitimate run well within this
                # (the longest silence is a non-streamed statement's own duration); past it
                # the server is frozen or gone, whatever statement_timeout allows
                answer_timeout_s = float(self.answer_timeout_s)

                @event.listens_for(engine, "do_connect")
                def _connect_answered(_dialect, _record, cargs, cparams):
                    conn = _AnsweredConnection.connect(*cargs, **cparams)
                    conn.answer_timeout_s = answer_timeout_s
                    return conn
            self._engine = engine
        return self._engine

    @contextlib.contextmanager
    def begin(self, label: str = "warehouse", *, read_only: bool = False) -> Iterator[Connection]:
        """One transaction; database errors become a WarehouseError naming `label` and the
        URL (transient when the database could not be reached or answered), a refused login an
        AccessDeniedError (never retried). `read_only`: one
        that only reads (PostgreSQL refuses a write in it; on SQLite it takes no write lock,
        so it runs beside another connection's transaction)."""
        # PostgreSQL's dialect makes the transaction READ ONLY; SQLite's begin hook reads ours
        engine = self.engine.execution_options(postgresql_readonly=True, **{READ_ONLY: True}) \
            if read_only else self.engine
        try:
            with engine.begin() as conn:
                yield conn
        except Exception as exc:
            errors, transient_errors = _database_errors()
            if not isinstance(exc, errors):
                raise
            cause = _no_answer_in(exc) or getattr(exc, "orig", None) or exc
            reason = str(cause).strip().splitlines()[0]
            psycopg = sys.modules.get("psycopg")
            if psycopg is not None and isinstance(cause, psycopg.OperationalError) and \
                    any(sign in reason for sign in _LOGIN_REFUSED):
                raise AccessDeniedError(f"{label} {self.display_url}: {reason}",
                                        url=self.display_url) from None
            transient = isinstance(exc, transient_errors)
            raise WarehouseError(f"{label} {self.display_url}: {reason}",
                                 transient=transient) from None

    def ensure_schema(self, created_by: str = "tokokita-etl") -> None:
        """Create the warehouse tables when missing (its identity's and those declared so far:
        a pipeline's `declare_tables()` first), and its identity row (a random id,
        `created_by`, when, revision 0) when it has none.

        On PostgreSQL the check-then-create runs under a transaction-scoped advisory lock:
        two first runs creating the same table at once otherwise race in the catalog
        (`duplicate key value violates unique constraint "pg_type_typname_nsp_index"`).
        SQLite's `BEGIN IMMEDIATE` already makes it one writer at a time."""
        with self.begin() as conn:
            if not self.is_sqlite:
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                             {"key": SCHEMA_LOCK_KEY})
            metadata.create_all(conn, checkfirst=True)
            if conn.execute(text("SELECT COUNT(*) FROM warehouse_identity")).scalar_one() == 0:
                conn.execute(warehouse_identity.insert().values(
                    warehouse_id=uuid.uuid4().hex, created_by=created_by,
                    created_at=datetime.now(UTC).isoformat(timespec="seconds"), revision=0))

    def bump_revision(self, conn: Connection) -> dict[str, object]:
        """Count one more change of the warehouse's rows, inside the transaction making it:
        its identity's id and new revision (`tokokita_etl.runner.identity`), which the watermark
        records with the date's success."""
        row = conn.execute(text(
            "UPDATE warehouse_identity SET revision = revision + 1 "
            "RETURNING warehouse_id, revision")).first()
        if row is None:
            raise WarehouseError(f"warehouse {self.display_url}: its identity row is gone "
                                 "(table warehouse_identity is empty); nothing was loaded")
        return {"id": row[0], "revision": int(row[1])}

    def day_param(self, day: date) -> date | str:
        """The bound value for an `order_date` comparison."""
        return day.isoformat() if self.is_sqlite else day

    def money_sum(self, column: str) -> str:
        """An exact SUM over a money column, as the column's own type."""
        if self.is_sqlite:
            # SQLite has no exact decimal: the cents, the rupiah's last nine digits and the
            # digits above them are summed apart as 64-bit integers and carried into text
            # (a single rupiah sum overflowed past 9.2e18, 923 rows at the largest bruto)
            rupiah = f"CAST(substr({column}, 1, length({column}) - 3) AS INTEGER)"
            cents = f"SUM(CAST(substr({column}, -2) AS INTEGER))"
            low = f"(SUM({rupiah} % {_BILLION}) + {cents} / 100)"
            high = f"(SUM({rupiah} / {_BILLION}) + {low} / {_BILLION})"
            return (f"CASE WHEN {high} = 0 THEN printf('%d.%02d', {low}, {cents} % 100) "
                    f"ELSE printf('%d%09d.%02d', {high}, {low} % {_BILLION}, {cents} % 100) END")
        return f"SUM({column})"

    @property
    def byte_order(self) -> str:
        """Collation clause that sorts by code point on both backends."""
        return "" if self.is_sqlite else ' COLLATE "C"'

    def key_order(self, table: Table, qualifier: str = "") -> str:
        """ORDER BY terms for one date's rows of `table`: its key within the date (its
        partition column left out), text in code-point order (`qualifier`: a table alias and
        dot)."""
        return ", ".join(
            f"{qualifier}{column.name}{self.byte_order if isinstance(column.type, String) else ''}"
            for column in table.primary_key.columns if column.name != table.info.get("partition"))

    def from_stage(self, table: Table, name: str) -> str:
        """SQL that turns staged column `name` (text, BIGINT for integers) into the type of
        `table`'s column of that name."""
        if self.is_sqlite:
            return name
        column_type = table.c[name].type
        if isinstance(column_type.dialect_impl(self.engine.dialect), String | Integer):
            return name
        return f"CAST({name} AS {column_type.compile(dialect=self.engine.dialect)})"

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

    def _render(self, value: object) -> object:
        if isinstance(value, datetime):
            return value.astimezone(self.tz).isoformat()
        if isinstance(value, date):
            return value.isoformat()
        if isinstance(value, Decimal):
            return f"{value:.2f}"
        return value

    def partition_rows(self, conn: Connection, table: Table, day: date) -> Iterator[list]:
        """Canonical rows of `table` for the partition date `day` (what the checksums
        digest), every column in order, sorted by the table's key in code-point order."""
        sql = (f"SELECT {', '.join(c.name for c in table.columns)} FROM {table.name} "
               f"WHERE {table.info['partition']} = :d ORDER BY {self.key_order(table)}")
        yield from self._canonical(conn, sql, day)

    def _canonical(self, conn: Connection, sql: str, day: date) -> Iterator[list]:
        result = conn.execution_options(stream_results=True, yield_per=20_000).execute(
            text(sql), {"d": self.day_param(day)})
        render = self._render
        for partition in result.partitions():
            for row in partition:
                yield [render(v) for v in row]

    @contextlib.contextmanager
    def small_sorter(self, conn: Connection) -> Iterator[None]:
        """On SQLite, the default 2 MB page cache while inside: SQLite's sorter keeps records
        in memory up to the page cache's size before it writes a sorted run, and one run of
        the whole date's rows (the 128 MB `SQLITE_CACHE_KB`) sorted slower than many small
        runs merged (a 1M-row date's per-kota GROUP BY: 1.8-1.9 s -> 1.2-1.5 s)."""
        if not self.is_sqlite:
            yield
            return
        size = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
        conn.exec_driver_sql(f"PRAGMA cache_size = -{SQLITE_SORT_CACHE_KB}")
        try:
            yield
        finally:
            conn.exec_driver_sql(f"PRAGMA cache_size = {int(size)}")
