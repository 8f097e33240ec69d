"""Regression: the record reader counted a lone carriage return as a line end.

Found by the fuzzed-partition suite (seed 20261110, files 42 and 51): `_extract_by_records`
read the partition as text with `newline=""`, which also ends a line at a carriage return
that is not part of a CRLF. The contract's physical lines end at a line feed (the fast path,
the UTF-8 error location and the reference count them so), so after a `\\r\\r\\n` line end every
quarantine `line` was too high (file 42: line 7 instead of 4), and a record with a lone
carriage return inside an unquoted field was cut in two (file 51): its first part was accepted
as an order and the rest quarantined, where the `csv` module, given the physical line, rejects
the whole record ("new-line character seen in unquoted field") as a `malformed_row` with its
raw text and the next record starts on the next physical line. The gold file then counted an
order the reference does not.

The two files below are those fuzzed files cut down to the records that matter; each goes
through the real command line and the reference implementation.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from devtools.reference import run_reference
from tests.conftest import Workspace, in_process_cli, read_csv_rows
from tokokita_etl.orders.contract import EXTRACT_MALFORMED, EXTRACT_ROWS
from tokokita_etl.orders.extract import _extract_by_records
from tokokita_etl.runner.stores.files import StateStore

DAY = date(2026, 11, 10)
CLOCK = datetime(2026, 11, 11, 19, 30, tzinfo=UTC)
HEADER = b"order_id,order_ts,customer_id,kota,produk,qty,harga_satuan,diskon"

#: file 42: CRLF applied twice, so every line ends in CR CR LF; record 3 has a bad timestamp
FILE_42 = (
    HEADER + b"\r\r\n"
    b"TK-1,2026-11-10 00:00:00,CUST-1,Depok,Kabel Data,1,70000,0\r\r\n"
    b"TK-2,2026-11-10 01:05:27,CUST-2,Malang,Teh Hijau,1,40500,2000\r\r\n"
    b"TK-3,2026-11-10 19:45,CUST-3,Jakarta Barat,Sarung Tenun,1,145000,29000\r\r\n"
    b"TK-4,2026-11-10 03:16:21,CUST-4,Depok,Kabel Data,1,54500,0\r\r\n"
)

#: file 51: a huge field appended after a CR CR line end, before the line feed
FILE_51 = (
    HEADER + b"\r\r\n"
    b"TK-1,2026-11-10 00:00:00,CUST-1,Surabaya,Kabel Data,2,62500,25000\r\r\n"
    b"TK-2,2026-11-10 06:00:00,CUST-2,Surabaya,Mukena Katun,1,210000,\r\r" + b"x" * 10_000
    + b"\n"
    b"TK-3,2026-11-10 12:16:30,CUST-3,Surabaya,Popok Bayi,2,89000,0\r\r\n"
)


def _run_both(tmp_path: Path, monkeypatch, capsys, data: bytes) -> tuple[Workspace, dict]:
    ws = Workspace(tmp_path, f"sqlite:///{tmp_path / 'warehouse.db'}")
    raw = ws.write_partition(DAY, data)
    code, _, err = in_process_cli(ws, monkeypatch, capsys, CLOCK)("run", "--date", DAY.isoformat())
    assert code == 0, err
    ref = run_reference(raw, DAY, ws.warehouse_url, tmp_path / "ref" / "gold",
                        tmp_path / "ref" / "quarantine")
    return ws, ref


def test_lines_after_cr_cr_lf_line_ends_are_numbered_by_line_feeds(tmp_path, monkeypatch, capsys):
    """Regression (fuzz seed 20261110, file 42): a bad timestamp on physical line 4 was
    quarantined as line 7 because each CR CR LF counted as two lines."""
    ws, ref = _run_both(tmp_path, monkeypatch, capsys, FILE_42)
    rows = read_csv_rows(ws.quarantine_file(DAY))
    assert [(r["line"], r["reason"], r["order_id"]) for r in rows] == [("4", "bad_order_ts", "TK-3")]
    assert ws.quarantine_file(DAY).read_bytes() == Path(ref["quarantine"]).read_bytes()
    assert ws.gold_file(DAY).read_bytes() == Path(ref["gold"]).read_bytes()


def test_a_lone_carriage_return_inside_an_unquoted_field_makes_the_whole_line_malformed(
        tmp_path, monkeypatch, capsys):
    """Regression (fuzz seed 20261110, file 51): the record on line 3 was cut at its lone
    carriage return, its first part accepted as order TK-2 (the gold file counted it) and the
    rest quarantined on an invented line 5; it is one malformed record on line 3."""
    ws, ref = _run_both(tmp_path, monkeypatch, capsys, FILE_51)
    rows = read_csv_rows(ws.quarantine_file(DAY))
    assert [(r["line"], r["reason"]) for r in rows] == [("3", "malformed_row")]
    assert rows[0]["raw"] == FILE_51.split(b"\n")[2].decode()
    assert ws.gold_file(DAY).read_text(encoding="utf-8").splitlines()[1:] == [
        "2026-11-10,Surabaya,2,4,303000.00,278000.00"]  # TK-1 and TK-3, not TK-2
    assert ws.quarantine_file(DAY).read_bytes() == Path(ref["quarantine"]).read_bytes()
    assert ws.gold_file(DAY).read_bytes() == Path(ref["gold"]).read_bytes()


def test_record_reader_keeps_a_carriage_return_that_ends_the_file_in_the_raw_text(tmp_path):
    """A CR with no LF after it, at the end of the file, does not end a line: the malformed
    record's raw text keeps it (only one CRLF or LF is dropped), as the reference does."""
    raw = tmp_path / "raw"
    raw.mkdir()
    path = raw / f"pesanan_{DAY}.csv"
    path.write_bytes(HEADER + b"\r\nTK-1,2026-11-10 00:00:00,CUST-1\r\r")
    _extract_by_records(path, path.stat().st_size, tmp_path / "staging")
    assert pq.read_table(tmp_path / "staging" / EXTRACT_ROWS).num_rows == 0
    assert pq.read_table(tmp_path / "staging" / EXTRACT_MALFORMED).to_pylist() == [
        {"line": 2, "raw": "TK-1,2026-11-10 00:00:00,CUST-1\r\r"}]


#: a classic-Mac partition (Excel's "CSV (Macintosh)"): every line ends with a lone CR
CLASSIC_MAC = (HEADER + b"\r"
               b"TK-1,2026-11-10 00:00:00,CUST-1,Depok,Kabel Data,1,70000,0\r"
               b"TK-2,2026-11-10 01:05:27,CUST-2,Malang,Teh Hijau,1,40500,2000\r")


def test_a_classic_mac_partition_fails_naming_its_cr_only_line_ends_and_the_fix(
        tmp_path, monkeypatch, capsys):
    """Regression: a partition whose lines end with a lone CR failed with Python's message
    (`header line has broken quoting (new-line character seen in unquoted field - do you need
    to open the file in universal-newline mode?)`), which names neither what the file holds
    nor what to do."""
    ws = Workspace(tmp_path, f"sqlite:///{tmp_path / 'warehouse.db'}")
    raw = ws.write_partition(DAY, CLASSIC_MAC)
    call = in_process_cli(ws, monkeypatch, capsys, CLOCK)
    code, out, err = call("run", "--date", DAY.isoformat())
    assert code == 1, out + err
    [error] = [line for line in out.splitlines() + err.splitlines()
               if line.startswith("[error]")]
    for said in (str(raw), "lone carriage return", "CR only", "holds 3 of them",
                 "LF or CRLF", "convert the line ends"):
        assert said in error, (said, error)
    assert "universal-newline" not in error
    entry = StateStore(ws.state_file, "orders").read().entry(DAY)
    assert (entry["status"], entry["failed_stage"]) == ("failed", "extract")
    assert "lone carriage return" in entry["error"]
    assert not ws.gold_file(DAY).exists()

    # converted as the message says (CR -> LF), the same partition succeeds
    ws.write_partition(DAY, CLASSIC_MAC.replace(b"\r", b"\n"))
    code, out, err = call("run", "--date", DAY.isoformat())
    assert code == 0, out + err
    assert StateStore(ws.state_file, "orders").read().entry(DAY)["rows"]["fact"] == 2


def test_a_header_with_broken_quoting_and_lf_line_ends_keeps_the_quoting_message(tmp_path):
    """Only CR-only line ends get the line-end message: broken quoting in an LF header is
    still named as broken quoting."""
    from tokokita_etl.errors import DataError

    raw = tmp_path / "raw"
    raw.mkdir()
    path = raw / f"pesanan_{DAY}.csv"
    path.write_bytes(b'order_id,"order_ts\n"x,y\n')
    with pytest.raises(DataError, match="header line has broken quoting"):
        _extract_by_records(path, path.stat().st_size, tmp_path / "staging")
