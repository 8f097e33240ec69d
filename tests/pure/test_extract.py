"""Extract's two readers: the line-vectorised fast path must stage exactly what the csv
module's record-by-record reader stages, or hand the file over to it.

Every test writes real files and runs both real readers; the staged Parquet files are compared
row for row (line numbers, fields, malformed raw text).
"""

from __future__ import annotations

import csv
import hashlib
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devtools.samples import generate_partition
from tests.conftest import HEADER, SAMPLE_RAW
from tokokita_etl.orders.contract import EXTRACT_MALFORMED, EXTRACT_ROWS
from tokokita_etl.orders.extract import (
    BLOCK_BYTES,
    MIN_BLOCK_BYTES,
    PARSE_THREADS,
    NeedsRecordReader,
    _extract_by_lines,
    _extract_by_records,
    _line_blocks,
    _unplain_lines,
    block_bytes,
    extract,
)

DAY = date(2026, 11, 10)
GOOD = "TK-1,2026-11-10 10:00:00,CUST-1,Bandung,Kaos,2,50000.00,1000"


def staged(folder: Path) -> tuple[list[dict], list[dict]]:
    rows = pq.read_table(folder / EXTRACT_ROWS).sort_by("line").to_pylist()
    malformed = pq.read_table(folder / EXTRACT_MALFORMED).to_pylist()
    return rows, malformed


def both_readers(path: Path, tmp: Path):
    """(fast result, fast staging) or (None, reason) when it handed over; and the record reader's."""
    size = path.stat().st_size
    slow = _extract_by_records(path, size, tmp / "records")
    try:
        fast = _extract_by_lines(path, size, tmp / "lines")
    except NeedsRecordReader as why:
        return (None, str(why)), (slow, staged(tmp / "records"))
    return (fast, staged(tmp / "lines")), (slow, staged(tmp / "records"))


def test_line_reader_stages_the_generated_partition_exactly_like_the_record_reader(tmp_path):
    path = tmp_path / "raw" / f"pesanan_{DAY}.csv"
    counts = generate_partition(path, DAY, 30_000, seed=3)
    (fast, fast_staged), (slow, slow_staged) = both_readers(path, tmp_path)
    assert fast is not None, "the generated partition must take the fast path"
    assert fast == slow
    assert fast_staged == slow_staged
    assert fast.malformed == counts["malformed_row"] > 0


@pytest.mark.parametrize("sample", sorted(SAMPLE_RAW.glob("pesanan_*.csv")), ids=lambda p: p.name)
def test_line_reader_agrees_with_the_record_reader_on_every_sample_partition(tmp_path, sample):
    (fast, fast_staged), (slow, slow_staged) = both_readers(sample, tmp_path)
    if fast is not None:
        assert (fast, fast_staged) == (slow, slow_staged)


def test_blocks_split_inside_a_quoted_line_keep_every_line_number(tmp_path):
    """Lines straddle the fast reader's block boundary: numbering must continue across blocks."""
    line = '"TK-{n}",2026-11-10 10:00:00,CUST-1,"Jakarta, Selatan",Kaos,2,50000.00,\n'
    n_lines = BLOCK_BYTES // len(line) + 50
    path = tmp_path / f"pesanan_{DAY}.csv"
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(HEADER + "\n")
        for n in range(n_lines):
            handle.write(GOOD.replace("TK-1", f"TK-{n}") + ",x\n" if n % 997 == 0
                         else line.format(n=n))
    (fast, fast_staged), (slow, slow_staged) = both_readers(path, tmp_path)
    assert fast is not None
    assert (fast, fast_staged) == (slow, slow_staged)
    assert fast_staged[0][-1]["line"] == n_lines + 1


def test_blocks_read_into_reused_buffers_stage_exactly_like_the_record_reader(tmp_path):
    """Every block holds lines the csv module reads (blanked in the buffer for Arrow's
    reader), rows of the wrong width and CRLF line ends, over more blocks than there are
    buffers, the last line without a line end: a buffer filled again too early, or a
    blanked line read as a row, would change what is staged."""
    kinds = [
        GOOD.replace("TK-1", "TK-{n}") + "\n",
        'TK-{n},2026-11-10 10:00:00,C,"Medan"x,Kaos,1,1,\n',  # read by the csv module
        'TK-{n},2026-11-10 10:00:00,C,"Jakarta, Barat",Kaos,1,1,\r\n',
        "TK-{n},2026-11-10 10:00:00,C,Medan,Kaos,1,1,,extra\n",  # the wrong width
        'TK-{n},2026-11-10 10:00:00,C,Me"dan,Kaos,1,1,\n',  # read by the csv module
    ]
    path = tmp_path / f"pesanan_{DAY}.csv"
    n_lines = 90_000
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(HEADER + "\n")
        for n in range(n_lines):
            handle.write(kinds[n % 7 % len(kinds)].format(n=n))
        handle.write(GOOD.replace("TK-1", "TK-last"))
    size = path.stat().st_size
    assert -(-size // block_bytes(size)) > PARSE_THREADS + 1, "more blocks than buffers"
    (fast, fast_staged), (slow, slow_staged) = both_readers(path, tmp_path)
    assert fast is not None
    assert (fast, fast_staged) == (slow, slow_staged)
    assert fast.rows == n_lines + 1
    assert fast.malformed > 0


def test_a_block_buffer_is_filled_again_only_after_as_many_blocks_as_there_are_buffers(
        tmp_path):
    """The reuse is the caller's contract: block k's buffer is block k + buffers'. A view of
    a block kept past its turn makes the refill raise instead of changing under the view."""
    path = tmp_path / "lines.csv"
    path.write_bytes(b"".join(b"%07d,x\n" % n for n in range(400_000)))  # 4 MB
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        blocks = [(id(data), bytes(data), first, lines) for data, first, lines
                  in _line_blocks(handle, 131_072, MIN_BLOCK_BYTES, buffers=3, digest=digest)]
    assert b"".join(data for _, data, _, _ in blocks) == path.read_bytes()
    assert digest.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [first for _, _, first, _ in blocks] == \
        [2 + sum(lines for *_, lines in blocks[:k]) for k in range(len(blocks))]
    ids = [buffer for buffer, *_ in blocks]
    assert len(blocks) > 3 and len(set(ids)) == 3
    assert all(ids[k] == ids[k + 3] for k in range(len(ids) - 3))
    with open(path, "rb") as handle, pytest.raises(BufferError):
        kept = []
        for data, _, _ in _line_blocks(handle, 131_072, MIN_BLOCK_BYTES, buffers=3,
                                       digest=hashlib.sha256()):
            kept.append(memoryview(data))


def test_a_small_partition_is_read_in_blocks_that_give_each_parse_thread_two():
    assert block_bytes(9_609_761) == 2_402_441  # 100k generated rows: four blocks
    assert block_bytes(96_000_000) == BLOCK_BYTES  # 1M rows: 8 MiB blocks as before
    assert block_bytes(50_000) == MIN_BLOCK_BYTES
    for size in (MIN_BLOCK_BYTES * 4, 9_609_761, BLOCK_BYTES * 2 * PARSE_THREADS):
        assert -(-size // block_bytes(size)) == 2 * PARSE_THREADS


@pytest.mark.parametrize(("block", "unplain"), [
    (b'a,"b,c",d\n"e""f",g,""\r\n', []),
    (b'a,b\n', []),
    (b'a,b\nc,d"e,f\ng,h\n', [1]),  # a quote inside an unquoted field
    (b'a,"b"c,d\ne,"f",g\n', [0]),  # text after the closing quote
    (b'a,"b\nc",d\n', [0, 1]),  # a quoted field over two lines: both
    (b'x\na,"b,c\n', [1]),  # never closed
    (b'a, "b",c\n"d"x\n"e"\n', [0, 1]),  # a space before the opening quote; text after it
])
def test_lines_whose_quotes_do_not_all_delimit_fields_are_found(block, unplain):
    assert [index for index, _, _ in _unplain_lines(block)] == unplain
    for index, start, end in _unplain_lines(block):
        assert block[start:end] == block.splitlines(keepends=True)[index]


@pytest.mark.parametrize("body", [
    f"\ufeff{GOOD}\n{GOOD}\n",  # the block's first line starts with a byte order mark
    f"{GOOD}\n\ufeff{GOOD}\n{GOOD}\n",  # a later line does
    f"{GOOD}\n\n{GOOD}\n\r\n{GOOD}\n",  # empty lines
    f'{GOOD}\nTK-2,2026-11-10 10:00:00,C,Me"dan,Kaos,1,1,\n{GOOD}\n',  # a quote in a field
    f'{GOOD}\nTK-2,2026-11-10 10:00:00,C,"Me"dan,Kaos,1,1,\n{GOOD}\n',  # text after a quote
    f'{GOOD}\nTK-2,2026-11-10 10:00:00,C,"Jakarta, Barat",Kaos,1,1,,extra\n',
])
def test_what_arrows_csv_reader_reads_differently_is_still_staged_like_the_record_reader(
        tmp_path, body):
    """Arrow's CSV reader drops a byte order mark at a block's start, numbers rows without
    the empty lines, and reads quotes that do not delimit a field its own way: such lines and
    blocks must still be staged exactly as the record reader stages them."""
    path = tmp_path / f"pesanan_{DAY}.csv"
    path.write_text(f"{HEADER}\n{body}", encoding="utf-8", newline="")
    (fast, fast_staged), (slow, slow_staged) = both_readers(path, tmp_path)
    assert fast is not None
    assert (fast, fast_staged) == (slow, slow_staged)


def test_a_row_longer_than_arrows_reader_block_is_still_read_exactly(tmp_path):
    """A 1.6 MB line (eight fields of 100,000 two-byte characters, each within the csv field
    limit) inside a 5 MB partition: longer than the 1 MiB blocks Arrow's reader reads in."""
    raw = tmp_path / "raw"
    raw.mkdir()
    path = raw / f"pesanan_{DAY}.csv"
    long_line = ",".join(["é" * 100_000] * 8)
    good = "\n".join(GOOD.replace("TK-1", f"TK-{n}") for n in range(32_000))
    path.write_text(f"{HEADER}\n{good}\n{long_line}\n{good}\n", encoding="utf-8", newline="")
    assert block_bytes(path.stat().st_size) > 1 << 20
    result = extract(raw, DAY, tmp_path / "staging")
    slow = _extract_by_records(path, path.stat().st_size, tmp_path / "records")
    assert result == slow
    assert staged(tmp_path / "staging") == staged(tmp_path / "records")


@pytest.mark.parametrize(("text", "why"), [
    (f'{HEADER}\n{GOOD}\nTK-2,2026-11-10 10:00:00,C,"Jakarta\nSelatan",Kaos,1,1,\n{GOOD}\n',
     "runs on past the line end"),
    (f"{HEADER}\n{GOOD}\rTK-2,2026-11-10 10:00:00,C,Medan,Kaos,1,1,\n", "carriage return"),
    (f"{HEADER}\nTK-2,2026-11-10 10:00:00,C,Me\x00dan,Kaos,1,1,\n", "NUL"),
    (f'{HEADER}\n{GOOD}\nTK-3,2026-11-10 10:00:00,C,"Medan,Kaos,1,1,\n', "runs on past the line end"),
    (f"\n{HEADER}\n{GOOD}\n", "header"),
    (f"{HEADER}\n{GOOD}\nTK-2,2026-11-10 10:00:00,C,Medan,{'x' * 140_000},1,1,\n",
     "longer than the csv field limit"),
    (f'{HEADER}\n{GOOD}\nTK-2,2026-11-10 10:00:00,C,"Medan"x,{"x" * 140_000},1,1,\n',
     "longer than the csv field limit"),  # a line the csv module reads alone
])
def test_files_only_the_record_reader_reads_exactly_are_handed_over_with_a_reason(
        tmp_path, text, why):
    raw = tmp_path / "raw"
    raw.mkdir()
    path = raw / f"pesanan_{DAY}.csv"
    path.write_text(text, encoding="utf-8", newline="")
    with pytest.raises(NeedsRecordReader, match=why):
        _extract_by_lines(path, path.stat().st_size, tmp_path / "lines")
    assert not (tmp_path / "lines" / EXTRACT_ROWS).exists(), "nothing renamed into place"
    result = extract(raw, DAY, tmp_path / "staging")  # the public stage falls back by itself
    slow = _extract_by_records(path, path.stat().st_size, tmp_path / "records")
    assert result == slow
    assert staged(tmp_path / "staging") == staged(tmp_path / "records")


FIELD = st.text(alphabet=st.sampled_from(list('ab ,"\r\n\t\x00é\ufeff')), max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.lists(FIELD, min_size=0, max_size=10), max_size=12),
       line_end=st.sampled_from(["\n", "\r\n"]), final_newline=st.booleans(),
       bom=st.booleans())
def test_line_reader_never_disagrees_with_the_record_reader(tmp_path_factory, records, line_end,
                                                            final_newline, bom):
    """Arbitrary text joined as lines (quotes, commas, CR, LF, NUL in any field): the fast path
    stages exactly what the record reader stages, or hands the file over."""
    tmp = tmp_path_factory.mktemp("fuzz")
    body = line_end.join([HEADER, *(",".join(r) for r in records)])
    if final_newline:
        body += line_end
    path = tmp / f"pesanan_{DAY}.csv"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + body.encode("utf-8"))
    (fast, fast_staged), (slow, slow_staged) = both_readers(path, tmp)
    if fast is not None:
        assert fast == slow
        assert fast_staged == slow_staged


def test_a_quoted_field_longer_than_the_csv_modules_limit_stays_one_field(tmp_path):
    """Bug: a quoted notes field over 131,072 characters (the csv module's default field
    limit) spanning lines ended in its middle; the reader went on inside it, so a line of the
    note's text was staged as an order and the two real orders became malformed rows."""
    raw = tmp_path / "raw"
    raw.mkdir()
    path = raw / f"pesanan_{DAY}.csv"
    note = '"' + "x" * 70_000 + "\n" + "y" * 70_000 + \
        "\nFAKE-1,2026-11-10 10:00:00,C,Medan,P,1,999999,0,\n" + '"'
    single = "z" * 200_000
    path.write_text(f"{HEADER},catatan\n{GOOD},{note}\n"
                    f"{GOOD.replace('TK-1', 'TK-2')},{single}\n", encoding="utf-8", newline="")
    extract(raw, DAY, tmp_path / "staging")
    rows, malformed = staged(tmp_path / "staging")
    assert [(r["line"], r["order_id"]) for r in rows] == [(2, "TK-1"), (6, "TK-2")]
    assert malformed == []
    assert csv.field_size_limit() == 131_072, "the process's own limit is left as it was"
