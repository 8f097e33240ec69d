"""Checksums: the canonical line, and the fact checksum the database builds on SQLite and
PostgreSQL, which must equal `rows_checksum` over the canonical fact rows byte for byte."""

from __future__ import annotations

import hashlib
import re
from datetime import date
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from tokokita_etl.orders.checksums import fact_digest
from tokokita_etl.orders.contract import FACT_COLUMNS
from tokokita_etl.orders.schema import fact_pesanan, fact_rows, summary_harian
from tokokita_etl.warehouse import checksums
from tokokita_etl.warehouse.checksums import canonical_line, is_json_number, rows_checksum
from tokokita_etl.warehouse.database import Warehouse

DAY = date(2026, 11, 21)
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def fact_row(order_id: str, order_ts: str, *, customer_id: str = "C1", kota: str = "Medan",
             produk: str = "Teh", qty: int = 1, harga: str = "1000.00", diskon: str = "0.00",
             day: date = DAY) -> dict:
    """A fact row as the transform stage writes it (canonical text, qty an integer)."""
    bruto = qty * Decimal(harga)
    bersih = bruto - Decimal(diskon)
    return dict(zip(FACT_COLUMNS, (order_id, day.isoformat(), order_ts, customer_id, kota,
                                   produk, qty, harga, diskon, f"{bruto:.2f}", f"{bersih:.2f}"),
                    strict=True))


def insert_facts(warehouse: Warehouse, rows: list[dict]) -> None:
    """Write fact rows straight into the warehouse through the bulk load."""
    warehouse.ensure_schema()
    schema = pa.schema([(c, pa.int64() if c == "qty" else pa.string()) for c in FACT_COLUMNS])
    with warehouse.begin() as conn:
        warehouse.bulk_insert(conn, "fact_pesanan", list(FACT_COLUMNS),
                              [pa.RecordBatch.from_pylist(rows, schema=schema)])


def digest_and_rows(warehouse: Warehouse, day: date = DAY):
    with warehouse.begin() as conn:
        return fact_digest(warehouse, conn, day), list(fact_rows(warehouse, conn, day))


# values JSON escapes (quote, backslash, control characters), non-ASCII text and order_ids
# whose code-point order differs from a collation's; timestamps with fractions
ODD_ROWS = [
    fact_row("TK-E0", "2026-11-21T10:00:00+07:00", produk='Kaos "Polos"'),
    fact_row("TK-E1", "2026-11-21T10:00:00.123000+07:00", produk="Kabel C:\\USB",
             customer_id="C\\1"),
    fact_row("TK-E2", "2026-11-21T10:00:00.500000+07:00", produk="Tas\tKanvas", qty=3),
    fact_row("TK-E3", "2026-11-21T23:59:59.999999+07:00", produk="Kopi Gayo ☕"),
    fact_row("TK-E4", "2026-11-21T00:00:00+07:00", kota="Band\x1fung", produk="Sepatu\x01Lari"),
    fact_row("TK-a", "2026-11-21T11:00:00+07:00", kota="Surabaya", qty=2, harga="500.50",
             diskon="0.50"),
    fact_row("TK-Z", "2026-11-21T12:00:00+07:00", kota="Surabaya"),
    fact_row("TK-É", "2026-11-21T13:00:00+07:00", kota="Medan"),
]


def test_canonical_line_is_compact_json_with_non_ascii_kept_and_a_newline():
    row = ["TK-É", "2026-11-21", 'Kaos "Polos"\t\\', 3, "1000.00"]
    assert canonical_line(row) == '["TK-É","2026-11-21","Kaos \\"Polos\\"\\t\\\\",3,"1000.00"]\n'
    assert canonical_line(["a\x01"]) == '["a\\u0001"]\n'


def test_rows_checksum_is_sha256_of_the_concatenated_canonical_lines():
    rows = [["a", 1], ["b", 2]]
    expected = hashlib.sha256(b'["a",1]\n["b",2]\n').hexdigest()
    assert rows_checksum(rows) == expected
    assert rows_checksum(iter(rows)) == expected
    assert rows_checksum([]) == EMPTY_SHA256


def test_json_numbers_are_the_integer_columns_of_each_table():
    assert [c.name for c in fact_pesanan.columns if is_json_number(c)] == ["qty"]
    assert [c.name for c in summary_harian.columns if is_json_number(c)] == [
        "jumlah_pesanan", "total_qty"]


def test_fact_checksum_equals_rows_checksum_of_the_canonical_rows(workspace):
    warehouse = Warehouse(workspace.warehouse_url, "Asia/Jakarta")
    other_day = fact_row("TK-X", "2026-11-22T10:00:00+07:00", day=date(2026, 11, 22))
    insert_facts(warehouse, [*ODD_ROWS, other_day])
    digest, rows = digest_and_rows(warehouse)
    assert [r[0] for r in rows] == ["TK-E0", "TK-E1", "TK-E2", "TK-E3", "TK-E4", "TK-Z", "TK-a",
                                    "TK-É"]  # code-point order
    assert rows[2][6] == 3 and rows[2][2] == "2026-11-21T10:00:00.500000+07:00"
    assert digest.checksum == rows_checksum(rows)
    assert digest.rows == len(ODD_ROWS)


def test_fact_checksum_is_the_same_across_fetch_batches(sqlite_workspace, monkeypatch):
    """Escaped rows in several of SQLite's fetches (PostgreSQL streams one COPY)."""
    warehouse = Warehouse(sqlite_workspace.warehouse_url, "Asia/Jakarta")
    insert_facts(warehouse, ODD_ROWS)
    whole, rows = digest_and_rows(warehouse)
    monkeypatch.setattr(checksums, "FETCH_ROWS", 3)
    batched, _ = digest_and_rows(warehouse)
    assert batched == whole
    assert batched.checksum == rows_checksum(rows)


def test_fact_checksum_keeps_backslashes_that_copy_text_would_read_as_escapes(workspace):
    """PostgreSQL streams the rows JSON must escape in COPY's text format, which doubles each
    backslash: pairs of them, one before `n` or `N`, one at a value's end and one before a
    quote all come back as stored."""
    warehouse = Warehouse(workspace.warehouse_url, "Asia/Jakarta")
    rows = [fact_row("TK-B1", "2026-11-21T10:00:00+07:00", produk="a\\\\b \\n \\N \\"),
            fact_row("TK-B2", "2026-11-21T10:00:00+07:00", customer_id='\\"', kota="\\\\\\"),
            fact_row("TK-B3", "2026-11-21T10:00:00+07:00", produk="!Promo")]
    insert_facts(warehouse, rows)
    digest, stored = digest_and_rows(warehouse)
    assert [r[5] for r in stored] == ["a\\\\b \\n \\N \\", "Teh", "!Promo"]
    assert stored[1][3:5] == ['\\"', "\\\\\\"]
    assert (digest.checksum, digest.rows) == (rows_checksum(stored), 3)


def test_a_date_without_rows_has_the_checksum_of_no_lines(workspace):
    warehouse = Warehouse(workspace.warehouse_url, "Asia/Jakarta")
    insert_facts(warehouse, ODD_ROWS)
    digest, rows = digest_and_rows(warehouse, date(2026, 11, 20))
    assert (digest.checksum, digest.rows, rows) == (EMPTY_SHA256, 0, [])


@pytest.mark.postgres
@pytest.mark.parametrize("before", ["on", "off"])
def test_the_postgresql_digest_leaves_the_planners_sort_setting_as_it_found_it(pg_url, before):
    """Regression: the digest turned sorting off for the rest of validate's transaction, so
    the server costed the summary's sorted query as prohibitive and JIT-compiled it (40-100
    ms in every PostgreSQL validate)."""
    warehouse = Warehouse(pg_url, "Asia/Jakarta")
    insert_facts(warehouse, ODD_ROWS)
    with warehouse.begin() as conn:
        conn.exec_driver_sql(f"SET LOCAL enable_sort = {before}")
        digest = fact_digest(warehouse, conn, DAY)
        after = conn.exec_driver_sql("SELECT current_setting('enable_sort')").scalar_one()
        summary_plan = "\n".join(conn.exec_driver_sql(
            "EXPLAIN SELECT kota FROM summary_harian ORDER BY kota").scalars())
    assert (digest.rows, after) == (len(ODD_ROWS), before)
    # a plan the setting forbids is costed from 1e10 up
    startup_cost = float(re.search(r"cost=([0-9.]+)\.\.", summary_plan).group(1))
    assert (startup_cost >= 1e10) == (before == "off")


@pytest.mark.postgres
@pytest.mark.parametrize("tz", ["Asia/Kolkata", "America/St_Johns", "UTC"])
def test_postgresql_renders_timestamps_like_isoformat_in_any_zone(pg_url, tz):
    """Offsets with minutes, negative offsets and UTC take the long way in SQL."""
    warehouse = Warehouse(pg_url, tz)
    insert_facts(warehouse, ODD_ROWS)
    digest, rows = digest_and_rows(warehouse)
    assert rows[0][2] != ODD_ROWS[0]["order_ts"]  # rendered in `tz`
    assert digest.checksum == rows_checksum(rows)


@pytest.mark.postgres
def test_sqlite_and_postgresql_give_the_same_fact_checksum(tmp_path: Path, pg_url):
    lite = Warehouse(f"sqlite:///{tmp_path / 'wh.db'}", "Asia/Jakarta")
    pg = Warehouse(pg_url, "Asia/Jakarta")
    for warehouse in (lite, pg):
        insert_facts(warehouse, ODD_ROWS)
    (lite_digest, lite_rows), (pg_digest, pg_rows) = digest_and_rows(lite), digest_and_rows(pg)
    assert lite_rows == pg_rows
    assert lite_digest == pg_digest
