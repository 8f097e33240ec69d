"""Binary COPY rows made from Arrow batches (`tokokita_etl.warehouse.pg_copy`), read by a real
PostgreSQL server: every value must arrive as the server reads the same value's text."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pyarrow as pa
import pytest

from tests.db.conftest import _pg_connect
from tokokita_etl.errors import WarehouseError
from tokokita_etl.warehouse import pg_copy
from tokokita_etl.warehouse.database import Warehouse
from tokokita_etl.warehouse.pg_copy import Field

pytestmark = pytest.mark.postgres

FIELDS = [Field("t", "text"), Field("i4", "int4"), Field("i8", "int8"), Field("d", "date"),
          Field("ts", "timestamptz"), Field("money", "numeric", 18, 2),
          Field("whole", "numeric", 18, 0), Field("fine", "numeric", 12, 4)]
COLUMNS = ("t text, i4 integer, i8 bigint, d date, ts timestamptz, money numeric(18, 2), "
           "whole numeric(18, 0), fine numeric(12, 4)")
ROWS = [
    ("TK-É", 0, 0, "2026-11-21", "2026-11-21T10:00:00+07:00", "10.50", "0", "0.0001"),
    ("", -2147483648, -9223372036854775808, "1999-12-31", "1999-12-31T23:59:59.999999Z",
     "-0.05", "-1", "-99999999.9999"),
    (None, 2147483647, 9223372036854775807, "2000-01-01", "2000-01-01T00:00:00+00:00",
     "9999999999999999.99", "999999999999999999", "12345678.1234"),
    ("quote \" comma , tab \t newline \n backslash \\", 7, 10 ** 12, "1970-01-01",
     "2026-03-08T01:02:03.5-03:30", "0.00", "10000", "-0.5"),
    ("日本語 🛒", -7, -(10 ** 12), "2099-06-30", "1969-07-20T20:17:40+00:00", "100000000.01",
     "100000000", "10000.0000"),
]


def batch_of(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(FIELDS)
    types = [pa.string(), pa.int32(), pa.int64(), pa.string(), pa.string(), pa.string(),
             pa.string(), pa.string()]
    return pa.RecordBatch.from_arrays([pa.array(list(c), t) for c, t in zip(columns, types,
                                                                            strict=True)],
                                      names=[f.name for f in FIELDS])


@pytest.fixture
def pg(pg_url):
    """A connection on the test's fresh schema, with a binary and a text copy of the table."""
    from sqlalchemy.engine import make_url

    schema = make_url(pg_url).query["options"].split("=", 1)[1]
    with _pg_connect(pg_url) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        conn.execute("SET TimeZone = 'Asia/Jakarta'")
        conn.execute(f"CREATE TABLE by_binary ({COLUMNS})")
        conn.execute(f"CREATE TABLE by_text ({COLUMNS})")
        yield conn


def copy_binary(conn, batches, fields=FIELDS, constants=None, table="by_binary") -> None:
    names = ", ".join(f.name for f in fields)
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT binary)") \
            as copy:
        copy.write(pg_copy.SIGNATURE)
        for batch in batches:
            copy.write(pg_copy.encode_rows(batch, fields, constants))
        copy.write(pg_copy.TRAILER)


def copy_text(conn, rows) -> None:
    names = ", ".join(f.name for f in FIELDS)
    with conn.cursor() as cur, cur.copy(f"COPY by_text ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def table_rows(conn, table: str) -> list[tuple]:
    return conn.execute(f"SELECT * FROM {table} ORDER BY i8, t").fetchall()


def test_every_type_arrives_as_the_server_reads_its_text(pg):
    """Text (empty, NULL, quotes, control characters, non-ASCII), both integer widths at
    their limits, dates and timestamps before and after 2000-01-01 with offsets and
    fractions, numerics negative, zero and at their precision's limit, at scales 0, 2, 4."""
    copy_binary(pg, [batch_of(ROWS)])
    copy_text(pg, ROWS)
    assert table_rows(pg, "by_binary") == table_rows(pg, "by_text")
    assert len(table_rows(pg, "by_binary")) == len(ROWS)


def test_a_null_arrives_as_null_in_every_type_plain_or_dictionary(pg):
    """NULLs among fixed-width values (which binary COPY sends as a field of no value), in
    plain and in dictionary columns, and a column of NULLs only."""
    rows = [tuple(None if (n + place) % 3 == 0 else value
                  for place, value in enumerate(row)) for n, row in enumerate(ROWS * 2)]
    rows = [(*row[:2], n, *row[3:]) for n, row in enumerate(rows)]  # i8 orders the rows
    copy_binary(pg, [batch_of(rows)])
    plain = batch_of(rows)
    encoded = pa.RecordBatch.from_arrays(
        [column.dictionary_encode() if name != "i8" else column
         for name, column in zip(plain.schema.names, plain.columns, strict=True)],
        names=plain.schema.names)
    copy_binary(pg, [encoded])
    nulls = batch_of(rows[:3]).set_column(5, "money", pa.nulls(3, pa.string()))
    copy_binary(pg, [nulls])
    copy_text(pg, rows + rows + [(*r[:5], None, *r[6:]) for r in rows[:3]])
    assert table_rows(pg, "by_binary") == table_rows(pg, "by_text")
    assert pg.execute("SELECT count(*) FROM by_binary WHERE money IS NULL").fetchone()[0] >= 5


def test_rows_keep_their_order_across_batches_of_many_rows_one_and_none(pg):
    rows = [(f"TK-{n}", n, n, "2026-11-21", f"2026-11-21T10:{n % 60:02d}:00+07:00",
             f"{n}.{n % 100:02d}", str(n * 3), f"{n}.5") for n in range(300)]
    copy_binary(pg, [batch_of(rows[:250]), batch_of(rows[250:251]), batch_of([]),
                     batch_of(rows[251:])])
    copy_text(pg, rows)
    assert pg.execute("SELECT t FROM by_binary").fetchall() == [(r[0],) for r in rows]
    assert table_rows(pg, "by_binary") == table_rows(pg, "by_text")


def test_dictionary_columns_are_written_as_their_values_nulls_included(pg):
    plain = batch_of(ROWS + ROWS[::-1])
    encoded = pa.RecordBatch.from_arrays(
        [column.dictionary_encode() if name != "i8" else column
         for name, column in zip(plain.schema.names, plain.columns, strict=True)],
        names=plain.schema.names)
    assert encoded.column("t").null_count == 2
    copy_binary(pg, [encoded.slice(0, len(ROWS))])
    copy_text(pg, ROWS)
    assert table_rows(pg, "by_binary") == table_rows(pg, "by_text")


def test_a_constant_column_gives_every_row_its_value(pg):
    rows = [(r[0], *r[1:3], "2026-11-21", *r[4:]) for r in ROWS]
    batch = batch_of(rows).drop_columns(["d", "money"])
    copy_binary(pg, [batch], constants={"d": date(2026, 11, 21), "money": "12.30"})
    copy_text(pg, [(*r[:5], "12.30", *r[6:]) for r in rows])
    assert table_rows(pg, "by_binary") == table_rows(pg, "by_text")
    copy_binary(pg, [batch.slice(0, 1)], constants={"d": "2026-11-22", "money": None})
    assert pg.execute("SELECT d, money FROM by_binary WHERE d = '2026-11-22'").fetchall() == \
        [(date(2026, 11, 22), None)]


def test_python_values_arrive_as_themselves(pg):
    stamp = datetime(2026, 11, 21, 10, 0, 0, 250_000, tzinfo=timezone(timedelta(hours=7)))
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["a"]), pa.array([1], pa.int32()), pa.array([2], pa.int64()),
         pa.array([date(2026, 11, 21)]), pa.array([stamp], pa.timestamp("us", tz="+07:00")),
         pa.array([Decimal("12.34")], pa.decimal128(18, 2)),
         pa.array([Decimal("5")], pa.decimal128(18, 0)),
         pa.array([Decimal("1.2345")], pa.decimal128(12, 4))],
        names=[f.name for f in FIELDS])
    copy_binary(pg, [batch])
    assert pg.execute("SELECT * FROM by_binary").fetchone() == (
        "a", 1, 2, date(2026, 11, 21), stamp, Decimal("12.34"), Decimal("5"),
        Decimal("1.2345"))


@pytest.mark.parametrize(("column", "value", "message"), [
    ("ts", "2026-11-21T10:00:00", "column ts: not a timestamptz value"),
    ("d", "21/11/2026", "column d: not a date value"),
    ("money", "12.345", "column money: not a numeric value"),
])
def test_a_value_its_type_cannot_hold_is_an_error_naming_the_column(column, value, message):
    row = dict(zip([f.name for f in FIELDS], ROWS[0], strict=True)) | {column: value}
    with pytest.raises(ValueError, match=message):
        pg_copy.encode_rows(batch_of([tuple(row.values())]), FIELDS)


def test_a_timestamp_without_a_zone_is_no_timestamptz_value():
    batch = pa.RecordBatch.from_arrays([pa.array([0], pa.timestamp("us"))], names=["ts"])
    with pytest.raises(ValueError, match=r"column ts: not a timestamptz value \(a timestamp "
                                         "without a time zone"):
        pg_copy.encode_rows(batch, [Field("ts", "timestamptz")])


def test_a_type_without_an_encoding_is_an_error_naming_the_column():
    with pytest.raises(ValueError, match="column t: no binary COPY encoding for json"):
        pg_copy.encode_rows(batch_of(ROWS), [Field("t", "json")])
    with pytest.raises(ValueError, match=r"column fine: numeric\(20, 6\) is encoded up to"):
        pg_copy.encode_rows(batch_of(ROWS), [Field("fine", "numeric", 20, 6)])


def test_the_warehouse_names_the_table_when_a_fact_value_cannot_be_sent(pg_url):
    """bulk_insert into the warehouse's own tables goes in binary: a value its column's type
    cannot hold is a WarehouseError naming the table and column, and nothing is written."""
    from tokokita_etl.orders.contract import FACT_COLUMNS
    from tokokita_etl.orders.pipeline import ORDERS

    ORDERS.declare_tables()
    warehouse = Warehouse(pg_url, "Asia/Jakarta")
    warehouse.ensure_schema()
    row = {"order_id": "TK-1", "order_date": "2026-11-21", "order_ts": "2026-11-21 10:00",
           "customer_id": "C1", "kota": "Medan", "produk": "Teh", "qty": 1,
           "harga_satuan": "1.00", "diskon": "0.00", "bruto": "1.00", "bersih": "1.00"}
    batch = pa.RecordBatch.from_pylist([row])
    with pytest.raises(WarehouseError, match="fact_pesanan: column order_ts: not a timestamptz"), \
            warehouse.begin() as conn:
        warehouse.bulk_insert(conn, "fact_pesanan", list(FACT_COLUMNS), [batch])
    with warehouse.begin() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM fact_pesanan").scalar_one() == 0
    warehouse.engine.dispose()
