"""Unicode whitespace in text fields: trimmed at both ends of every field and collapsed to one
ASCII space inside `kota`, exactly like ASCII whitespace, in the pipeline's transform (DuckDB)
and in the reference implementation (devtools/reference.py)."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from devtools.reference import check_row
from tests.conftest import csv_text
from tokokita_etl.orders.contract import REJECTED_ROWS, VALID_ROWS
from tokokita_etl.orders.extract import extract
from tokokita_etl.orders.transform import WS, title_kota, transform

DAY = date(2026, 11, 10)
GOOD = ["TK-1", "2026-11-10 10:00:00", "CUST-1", "Bandung", "Kaos", "2", "50000.00", "1000"]

KOTAS = [
    ("Depok", "Depok"),
    ("Depok\u00a0", "Depok"),
    ("\u00a0Depok", "Depok"),
    ("Jakarta\u3000Selatan", "Jakarta Selatan"),
    ("Jakarta Selatan", "Jakarta Selatan"),
    ("jakarta \u2003\u00a0 selatan", "Jakarta Selatan"),
    ("\x85Bogor", "Bogor"),
    ("Bogor\u2028", "Bogor"),
    ("\u202fbekasi\u205f", "Bekasi"),
]


def _process(tmp_path: Path, rows: list[list[str]]) -> tuple[dict, dict]:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / f"pesanan_{DAY.isoformat()}.csv").write_text(csv_text(rows), encoding="utf-8")
    staging = tmp_path / "staging"
    extract(raw, DAY, staging)
    transform(DAY, staging, tz="Asia/Jakarta")
    valid = {r["order_id"]: r for r in pq.read_table(staging / VALID_ROWS).to_pylist()}
    rejected = {r["order_id"]: r["reason"] for r in pq.read_table(staging / REJECTED_ROWS).to_pylist()}
    return valid, rejected


def test_whitespace_set_is_exactly_what_str_isspace_accepts():
    """Guards the rule's definition: the trimmed set is Python's `str.isspace`, no more, no less."""
    expected = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert set(WS) == expected


def test_unicode_whitespace_in_kota_does_not_make_a_city_of_its_own(tmp_path):
    """Bug: 'Depok\\u00a0', '\\u00a0Depok', 'Jakarta\\u3000Selatan' and '\\x85Bogor' became cities
    of their own beside 'Depok', 'Jakarta Selatan' and 'Bogor' (only ASCII whitespace was
    trimmed and collapsed)."""
    rows = [[f"TK-{i}", *GOOD[1:3], kota, *GOOD[4:]] for i, (kota, _) in enumerate(KOTAS)]
    valid, rejected = _process(tmp_path, rows)
    assert rejected == {}
    for i, (kota, expected) in enumerate(KOTAS):
        assert valid[f"TK-{i}"]["kota"] == expected, kota
        assert title_kota(kota) == expected
        reference = check_row([f"TK-{i}", *GOOD[1:3], kota, *GOOD[4:]], DAY)
        assert reference[3] == expected
    assert {v["kota"] for v in valid.values()} == {"Depok", "Jakarta Selatan", "Bogor", "Bekasi"}


@pytest.mark.parametrize("kota", ["\u00a0", "\u3000\u3000", "\x85", " \u00a0\t\u2029 "])
def test_kota_of_only_unicode_whitespace_is_missing_kota(tmp_path, kota):
    """Bug: a kota made only of non-ASCII spaces (U+00A0, U+3000, U+0085) was a valid city
    instead of `missing_kota`."""
    valid, rejected = _process(tmp_path, [["TK-1", *GOOD[1:3], kota, *GOOD[4:]]])
    assert valid == {}
    assert rejected == {"TK-1": "missing_kota"}
    assert check_row(["TK-1", *GOOD[1:3], kota, *GOOD[4:]], DAY) == "missing_kota"


def test_every_field_is_trimmed_of_unicode_whitespace(tmp_path):
    """Bug: only ASCII whitespace was trimmed, so a no-break space around an id, a number or a
    time stamp made a different id or a rejected row."""
    values = ["\u00a0TK-1\u3000", "\x852026-11-10T09:05:44\u00a0", "\u2003CUST-1\u00a0",
              "Bandung", "\u3000Kaos Polos\u00a0", "\u00a03\x85", "\u202f59000.50\u00a0",
              "\u3000\u00a0"]
    valid, rejected = _process(tmp_path, [values])
    assert rejected == {}
    row = valid["TK-1"]
    assert (row["customer_id"], row["produk"], row["qty"]) == ("CUST-1", "Kaos Polos", 3)
    assert (row["harga_satuan"], row["diskon"], row["bruto"]) == ("59000.50", "0.00", "177001.50")
    reference = check_row(values, DAY)
    assert reference[0] == "TK-1" and reference[2] == "CUST-1" and reference[4] == "Kaos Polos"


def test_blank_unicode_order_id_is_missing_order_id(tmp_path):
    """Bug: an order_id of only U+00A0 / U+3000 was loaded as a real key."""
    valid, rejected = _process(tmp_path, [["\u00a0\u3000", *GOOD[1:]]])
    assert valid == {}
    assert list(rejected.values()) == ["missing_order_id"]
    assert check_row(["\u00a0\u3000", *GOOD[1:]], DAY) == "missing_order_id"
