"""Extract: stream the raw CSV partition into a columnar staging file."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import itertools
import logging
import operator
import os
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tokokita_etl.errors import DataError, MissingPartitionError
from tokokita_etl.files import atomic_path, atomic_writer
from tokokita_etl.orders.contract import (
    EXTRACT_MALFORMED,
    EXTRACT_ROWS,
    REQUIRED_COLUMNS,
    partition_path,
)
from tokokita_etl.runner.inputs import (
    LINE_DIGESTS_MAX_BYTES,
    file_fingerprint,
    fingerprint,
    line_digests,
    stamp_of_stat,
)

log = logging.getLogger(__name__)
BATCH_ROWS = 65_536
ROWS_SCHEMA = pa.schema([("line", pa.int64())] + [(c, pa.string()) for c in REQUIRED_COLUMNS])
MALFORMED_SCHEMA = pa.schema([("line", pa.int64()), ("raw", pa.string())])
# statistics of the text columns cost a fifth of the write and nothing reads them; a
# dictionary only where values repeat: the others overflowed theirs and were written plain
# anyway, after a third of the write's time spent trying (same file size)
STAGED_WRITE = {"write_statistics": ["line"],
                "use_dictionary": ["kota", "produk", "qty", "harga_satuan", "diskon"]}


@dataclass
class ExtractResult:
    """What extract read."""

    file: str
    bytes: int
    rows: int  # data records, malformed ones included
    malformed: int
    extra_columns: list[str] = field(default_factory=list)
    #: the fingerprint of the bytes read (`runner.inputs.fingerprint`)
    raw: dict = field(default_factory=dict)
    #: a small file's line digests (`runner.inputs.line_digests`), "" for a larger one
    raw_lines: str = ""

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


def _read_header(reader, path: Path) -> list[str]:
    try:
        for header in reader:
            if header:
                return [name.strip() for name in header]
    except csv.Error as exc:
        lone = _lone_carriage_returns(path)
        if lone:
            raise DataError(
                f"{path}: the lines end with a lone carriage return (CR only, as classic Mac "
                f"OS and Excel's \"CSV (Macintosh)\" write): its first line holds {lone} of "
                "them and no line feed, so the header never ends; partition lines must end "
                "with LF or CRLF: convert the line ends (for example `tr '\\r' '\\n' < in.csv "
                "> out.csv`, or save it as \"CSV UTF-8\") and run again") from None
        raise DataError(f"{path}: header line has broken quoting ({exc})") from None
    raise DataError(f"{path}: no header row (the file has no records)")


#: how much of the first line `_lone_carriage_returns` reads
FIRST_LINE_BYTES = 1 << 20


def _lone_carriage_returns(path: Path) -> int:
    """The carriage returns not followed by a line feed in the file's first physical line
    (its first MiB): a header that holds one ended its line with CR only."""
    with open(path, "rb") as handle:
        line = handle.readline(FIRST_LINE_BYTES)
    return line.count(b"\r") - line.count(b"\r\n")


#: a header is quoted in an error only when it looks like column names: raw content of a
#: binary or non-CSV file never reaches the watermark, manifests or logs
MAX_SHOWN_HEADER = 300


def _looks_like_names(header: list[str]) -> bool:
    return sum(len(name) + 2 for name in header) <= MAX_SHOWN_HEADER \
        and all(name.isprintable() and "\ufffd" not in name for name in header)


def _found_names(header: list[str]) -> str:
    if _looks_like_names(header):
        return f"found: {', '.join(header)}"
    return (f"the first line does not look like a CSV header: {len(header)} field(s) of "
            "non-printable or over-long text, not shown")


def _column_indexes(header: list[str], path: Path) -> tuple[list[int], list[str]]:
    seen: set[str] = set()
    for name in header:
        if name in seen:
            shown = repr(name) if _looks_like_names([name]) else "(a non-printable name)"
            raise DataError(f"{path}: header names column {shown} twice")
        seen.add(name)
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise DataError(
            f"{path}: missing required column(s) {', '.join(missing)} in header line 1 "
            f"({_found_names(header)})"
        )
    extra = [c for c in header if c not in REQUIRED_COLUMNS]
    return [header.index(c) for c in REQUIRED_COLUMNS], extra


def _bad_utf8_location(path: Path) -> str:
    """`line N, byte offset X` of the first invalid UTF-8 byte (text is decoded in chunks, so
    the csv reader's line number is not where the bad byte is)."""
    offset = 0
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8")  # a newline byte never occurs inside a UTF-8 sequence
            except UnicodeDecodeError as exc:
                return f"line {number}, byte offset {offset + exc.start}"
            offset += len(raw)
    return f"byte offset {offset}"


def _physical_lines(handle) -> Iterator[str]:
    """The lines of a binary file handle as text, the BOM dropped: a physical line ends at a
    line feed only (docs/decisions.md). A carriage return that is not part of a CRLF does not
    end a line, as in the fast path, the UTF-8 error location and the reference; a text-mode
    file (`newline=""`) would also end lines at a lone carriage return, so records and line
    numbers would follow a different line model. A newline byte never occurs inside a UTF-8
    sequence, so decoding line by line is exact."""
    first = True
    for raw in handle:
        if first:
            raw, first = raw.removeprefix(BOM), False
        yield raw.decode("utf-8")


def _strip_line_end(text: str) -> str:
    """The record's raw text without its final line end (one CRLF or LF; other carriage
    returns are part of the text)."""
    if text.endswith("\r\n"):
        return text[:-2]
    return text.removesuffix("\n")


def _raw_lines(path: Path, wanted: list[tuple[int, int]]) -> dict[int, str]:
    """Re-read the physical lines of the malformed records (rare, so a second pass is cheap)."""
    spans = dict(wanted)
    out: dict[int, str] = {}
    current: int | None = None
    with open(path, "rb") as handle:
        for number, text in enumerate(_physical_lines(handle), start=1):
            if current is None and number in spans:
                current, out[number] = number, ""
            if current is not None:
                out[current] += text
                if number >= spans[current]:
                    out[current] = _strip_line_end(out[current])
                    current = None
    return out


def extract(raw_dir: Path, day: date, staging: Path) -> ExtractResult:
    """Read partition `day` into `staging/extract.parquet` (+ malformed records)."""
    path = partition_path(raw_dir, day)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise MissingPartitionError(f"{path}: partition {day} does not exist") from None
    _check_inside(path, raw_dir)
    if size == 0:
        raise MissingPartitionError(f"{path}: partition {day} is empty (0 bytes)")

    staging.mkdir(parents=True, exist_ok=True)
    try:
        result = _extract_by_lines(path, size, staging)
    except NeedsRecordReader as why:
        log.info("%s: %s; reading it record by record", path, why)
        result = _extract_by_records(path, size, staging)
    if result.extra_columns:
        log.warning("%s: ignoring extra column(s): %s", path, ", ".join(result.extra_columns))
    return result


def _check_inside(path: Path, raw_dir: Path) -> None:
    """A partition is a regular file that resolves inside `raw_dir` (docs/decisions.md): a
    link out of it, a folder, a FIFO or a device is refused without reading it."""
    target = path.resolve()
    try:
        target.relative_to(Path(raw_dir).resolve())
    except ValueError:
        raise DataError(f"{path}: a link to {target}, outside the raw folder {raw_dir}; a "
                        "partition must resolve inside the raw folder (nothing was read)") from None
    if not target.is_file():
        what = "" if target == path.absolute() else f" ({target})"
        raise DataError(f"{path}: not a regular file{what}; nothing was read")


class NeedsRecordReader(Exception):
    """The file has something only the csv module's record-by-record reading handles exactly."""


def _extract_by_lines(path: Path, size: int, staging: Path) -> ExtractResult:
    """The fast path, exact when every record is one physical line (checked as it goes).

    Blocks of lines are read by Arrow's CSV reader, the few lines whose quotes it would read
    differently by the csv module one by one (`_parse_block`). Anything else (a record
    spanning lines, a lone carriage return, a NUL, invalid UTF-8, an over-long line) raises
    `NeedsRecordReader` before anything is renamed into place."""
    limit = csv.field_size_limit()
    malformed: list[tuple[int, str]] = []
    rows = 0
    # Arrow writes the file itself: through a Python file object each of its writes (about
    # 1,200 at 1M rows) waited for the interpreter lock the parsing threads pass around
    digest = hashlib.sha256()
    with open(path, "rb") as handle, atomic_path(staging / EXTRACT_ROWS) as out, \
            pa.OSFile(str(out), "wb") as sink:
        stat = os.fstat(handle.fileno())
        first = handle.readline()
        digest.update(first)
        header_text = _decode_line(first.removeprefix(BOM))
        if not first.endswith(b"\n") or not header_text.strip() or "\r" in header_text \
                or "\x00" in header_text:
            raise NeedsRecordReader("the header is not a plain first line")
        try:
            records = list(csv.reader([header_text], strict=True))
        except csv.Error:
            raise NeedsRecordReader("the header is not one record") from None
        header = [name.strip() for name in records[0]]
        indexes, extra = _column_indexes(header, path)
        shape = _LineShape(width=len(header), indexes=indexes, limit=limit)
        # Arrow's kernels release the GIL: blocks are parsed on two threads while this one
        # reads the next block and writes the parsed ones, in order
        with pq.ParquetWriter(sink, ROWS_SCHEMA, **STAGED_WRITE) as writer, \
                ThreadPoolExecutor(max_workers=PARSE_THREADS) as pool:
            pending: deque[Future] = deque()

            def write_oldest() -> None:
                nonlocal rows
                table, bad, records_n = pending.popleft().result()
                rows += records_n
                malformed.extend(bad)
                if table.num_rows:
                    writer.write_table(table)

            # a block's buffer is read into again `PARSE_THREADS + 1` blocks later: by then
            # the oldest pending block has been parsed and written (at most `PARSE_THREADS`
            # stay pending while the next one is read)
            for data, first_line, lines in _line_blocks(handle, limit, block_bytes(size),
                                                        buffers=PARSE_THREADS + 1,
                                                        digest=digest):
                pending.append(pool.submit(_parse_block, data, first_line, lines, shape))
                if len(pending) > PARSE_THREADS:
                    write_oldest()
            while pending:
                write_oldest()
        digests = line_digests(handle) if stat.st_size <= LINE_DIGESTS_MAX_BYTES else None
    _write_malformed(staging, sorted(malformed))
    # Arrow's allocator keeps the blocks' freed memory; the next stage in this process
    # (DuckDB's transform in `tokokita-etl run`) would otherwise add its own on top of it
    pa.default_memory_pool().release_unused()
    return ExtractResult(file=str(path), bytes=size, rows=rows, malformed=len(malformed),
                         extra_columns=extra, raw=fingerprint(
                             stat.st_size, digest.hexdigest(), stamp_of_stat(stat)),
                         raw_lines=digests or "")


BOM = b"\xef\xbb\xbf"
BLOCK_BYTES = 8 << 20
MIN_BLOCK_BYTES = 1 << 20
PARSE_THREADS = 2


def block_bytes(size: int) -> int:
    """How much of a `size`-byte partition each block reads: `BLOCK_BYTES`, or for a smaller
    file the share that gives every parse thread two blocks (a 9.6 MB file read in 8 MB
    blocks left one thread five sixths of the parsing), at least `MIN_BLOCK_BYTES`."""
    return max(MIN_BLOCK_BYTES, min(BLOCK_BYTES, -(-size // (2 * PARSE_THREADS))))


def _line_blocks(handle, limit: int, size: int, *, buffers: int, digest: Any
                 ) -> Iterator[tuple[bytearray, int, int]]:
    """Blocks of whole lines (each ending in a newline), read `size` bytes at a time, with
    the number of their first line and how many lines they hold. A block's partial last
    line is read again with the next block (joining it to the next block instead copied
    every block twice: 1M rows, 0.18-0.22 -> 0.14-0.15 s, most of it page faults).

    The blocks are read into `buffers` bytearrays in turn, so a buffer is filled again
    `buffers` blocks later: the caller is done with a block by then. A new 8 MiB object per
    block cost its pages' first-touch faults on every block, and so did each copy of it.
    A buffer still exported (a view of it kept past its block) makes the refill raise
    BufferError rather than change what the view shows. `digest` is given each byte read once,
    in file order (a block's bytes, without the line end added to a last line that has none)."""
    pool: list[bytearray] = []
    line = 1  # the header
    for turn in itertools.count():
        if len(pool) < buffers:
            pool.append(bytearray(size))
        data = pool[turn % buffers]
        if len(data) < size:
            data.extend(bytes(size - len(data)))  # within the memory it already holds
        with memoryview(data) as view:
            got = handle.readinto(view)
        if not got:
            return
        at_end = got < len(data)
        del data[got:]
        cut = data.rfind(b"\n") + 1
        while cut == 0 and not at_end:  # one line longer than the block
            if len(data) > limit:
                raise NeedsRecordReader("a line longer than the csv field limit")
            more = handle.read(size)
            at_end = len(more) < size
            data += more
            cut = data.rfind(b"\n") + 1
        line_end = b""
        if cut < len(data):
            if not at_end:
                handle.seek(cut - len(data), os.SEEK_CUR)
                del data[cut:]
            elif data.endswith(b"\r"):  # a CR ending the file is text, not a CRLF to trim
                raise NeedsRecordReader("a carriage return that does not end a line")
            else:
                line_end = b"\n"  # the last line has no line end
        digest.update(data)
        data += line_end
        lines = data.count(b"\n")
        yield data, line + 1, lines
        line += lines


@dataclass(frozen=True)
class _LineShape:
    width: int  # fields per record (the header's)
    indexes: list[int]  # where each required column is
    limit: int  # the csv module's field size limit


def _decode_line(raw: bytes) -> str:
    try:
        return raw.decode("utf-8").removesuffix("\n").removesuffix("\r")
    except UnicodeDecodeError:
        raise NeedsRecordReader("the header is not valid UTF-8") from None


def _parse_block(data: bytearray, first_line: int, lines: int, shape: _LineShape
                 ) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """`_parse_lines`' result, from Arrow's CSV reader: one C++ pass (1M rows: 0.94 -> 0.42
    CPU seconds against splitting the lines and then the fields in Arrow). The reader reads
    a line exactly as the csv module does when each of its quotes opens a field, is doubled
    inside one or closes it before a comma or the line end: the other lines
    (`_unplain_lines`) are read by the csv module, and blanked in `data` first, so that the
    reader sees each as a one-field row of spaces, which it hands to `keep_invalid` like
    any row of the wrong width (a copy of the block without them cost half as much as
    Arrow's parse of it, most of it first-touch page faults). A block with an empty line
    (the reader's row numbers skip it) or that starts with a byte order mark (the reader
    drops it) is left to `_parse_lines`."""
    if b"\x00" in data:
        raise NeedsRecordReader("a NUL character")
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        raise NeedsRecordReader("a carriage return that does not end a line")
    if not data.isascii():
        try:
            data.decode("utf-8")  # before the reader, which decodes an invalid row to report it
        except UnicodeDecodeError:
            raise NeedsRecordReader("invalid UTF-8") from None
    if data.startswith(BOM):
        return _parse_lines(data, first_line, shape)
    unplain = _unplain_lines(data)  # (index in the block, start, end) of each
    if any(end - start > shape.limit for _, start, end in unplain):
        raise NeedsRecordReader("a line longer than the csv field limit")
    unplain_text = [bytes(data[start:end]) for _, start, end in unplain]
    for _, start, end in unplain:
        data[start:end - 1] = b" " * (end - 1 - start)  # its line end stays
    invalid: list[tuple[int, str]] = []  # (row number from 1, raw text): not the header's width

    def keep_invalid(row) -> str:
        invalid.append((row.number, row.text))
        return "skip"

    names = [str(i) for i in range(shape.width)]
    table = pacsv.read_csv(
        pa.BufferReader(data),
        read_options=pacsv.ReadOptions(use_threads=False, column_names=names),
        parse_options=pacsv.ParseOptions(invalid_row_handler=keep_invalid),
        convert_options=pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False,
            quoted_strings_can_be_null=False, check_utf8=False),
    )
    # the reader skips empty lines: only a row per line makes its row numbers line numbers
    if table.num_rows + len(invalid) != lines:
        for (_, start, end), text in zip(unplain, unplain_text, strict=True):
            data[start:end] = text
        return _parse_lines(data, first_line, shape)
    blanked = {index for index, _, _ in unplain}
    invalid = [(n - 1, text) for n, text in invalid if n - 1 not in blanked]  # block indexes
    if any((pc.max(pc.binary_length(column)).as_py() or 0) > shape.limit
           for column in table.columns) or any(len(text) > shape.limit for _, text in invalid):
        raise NeedsRecordReader("a line longer than the csv field limit")
    # the block index of each well-formed row the reader kept
    at = _ones_but(lines, itertools.chain(blanked, (index for index, _ in invalid)))
    rows = pa.Table.from_arrays([pc.add(at.cast(pa.int64()), first_line),
                                 *(table.column(i) for i in shape.indexes)], schema=ROWS_SCHEMA)
    malformed = [(first_line + index, text) for index, text in invalid]
    if unplain:
        parsed, bad = _parse_quoted(
            [_strip_line_end(text.decode()) for text in unplain_text],
            [first_line + index for index, _, _ in unplain], shape)
        malformed.extend(bad)
        if parsed:
            rows = pa.concat_tables([rows, parsed])
    return rows, malformed, lines


def _ones_but(length: int, zeros: Iterable[int]) -> pa.UInt64Array:
    """The indexes 0 .. length - 1 without `zeros`."""
    kept = bytearray(b"\x01") * length
    for index in zeros:
        kept[index] = 0
    return pc.indices_nonzero(pa.Array.from_buffers(pa.uint8(), length,
                                                    [None, pa.py_buffer(kept)]))


def _unplain_lines(data: bytes | bytearray) -> list[tuple[int, int, int]]:
    """The lines of `data` (whole lines) holding a quote character that does not open a
    field, is not doubled inside a quoted field, or does not close it right before a comma or
    the line end (a quoted field running past its line end included), as (line index in the
    block, start, end) in order. Written out because it visits only the quotes: a regular
    expression over the block cost 25 times as much."""
    find = data.find
    found: list[tuple[int, int, int]] = []
    counted_to = index = 0  # index: the line number (from 0) at byte `counted_to`
    at = find(b'"')
    while at != -1:
        plain = not at or data[at - 1] in b",\n"
        inside = at + 1
        while plain:
            close = find(b'"', inside)
            if close == -1 or find(b"\n", inside, close) != -1:
                plain = False
            elif data[close + 1:close + 2] == b'"':
                inside = close + 2
            else:
                plain = data[close + 1:close + 2] in (b",", b"\n") \
                    or data[close + 1:close + 3] == b"\r\n"
                break
        if plain:
            at = find(b'"', close + 1)
            continue
        start = data.rfind(b"\n", 0, at) + 1
        end = find(b"\n", at) + 1
        index += data.count(b"\n", counted_to, start)
        counted_to = start
        found.append((index, start, end))
        at = find(b'"', end)
    return found


def _parse_lines(data: bytes | bytearray, first_line: int, shape: _LineShape
                 ) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """Records of whole lines `data` (ending in a newline) numbered from `first_line`: the
    well-formed ones as a table, the malformed ones as (line, raw), and the record count.
    Lines without a quote are split on commas in Arrow, the others read by the csv module;
    for the blocks `_parse_block` leaves to it, which has checked them (no NUL, every
    carriage return ending a line, valid UTF-8)."""
    carriage_returns = b"\r" in data
    text = pa.array([data], pa.binary()).cast(pa.string())
    lines = pc.list_flatten(pc.split_pattern(text, "\n"))
    lines = lines.slice(0, len(lines) - 1)  # after the final newline
    if carriage_returns:
        lines = pc.utf8_rtrim(lines, characters="\r")
    lengths = pc.binary_length(lines)
    if pc.max(lengths).as_py() > shape.limit:
        raise NeedsRecordReader("a line longer than the csv field limit")
    quoted = pc.match_substring(lines, '"')
    # one more split than a record has fields: a line with too many shows as width + 1
    fields = pc.split_pattern(lines, ",", max_splits=shape.width)
    plain = pc.invert(quoted)
    whole = pc.and_(plain, pc.equal(pc.list_value_length(fields), shape.width))
    broken = pc.and_(pc.and_(plain, pc.invert(whole)), pc.greater(lengths, 0))
    records = len(lines) - pc.sum(pc.equal(lengths, 0)).as_py()

    at = pc.indices_nonzero(whole)
    # field i of whole line k is value offsets[k] + i (taking from the flat values costs
    # half of filtering the lists first and reading each element)
    starts = fields.offsets.take(at)
    columns = [fields.values.take(pc.add(starts, i)) for i in shape.indexes]
    numbers = pc.add(at.cast(pa.int64()), first_line)
    table = pa.Table.from_arrays([numbers, *columns], schema=ROWS_SCHEMA)

    at_broken = pc.indices_nonzero(broken)
    malformed = list(zip((first_line + i for i in at_broken.to_pylist()),
                         lines.take(at_broken).to_pylist(), strict=True))
    at_quoted = pc.indices_nonzero(quoted).to_pylist()
    if at_quoted:
        parsed, bad = _parse_quoted(lines.take(at_quoted).to_pylist(),
                                    [first_line + i for i in at_quoted], shape)
        malformed.extend(bad)
        if parsed:  # after the block's other rows: the stages after extract never rely on order
            table = pa.concat_tables([table, parsed])
    return table, malformed, records


def _parse_quoted(texts: list[str], numbers: list[int], shape: _LineShape
                  ) -> tuple[pa.Table | None, list[tuple[int, str]]]:
    """The csv module on lines holding a quote, each of which must be a whole record: a record
    that runs on into the next line (the reader consumed more than one) is left to the
    record reader; the sentinel makes an unclosed quote on the last line show the same way."""
    reader = csv.reader((t + "\n" for t in [*texts, "sentinel"]), strict=True)
    good: list[tuple] = []
    good_lines: list[int] = []
    malformed: list[tuple[int, str]] = []
    pick = operator.itemgetter(*shape.indexes)
    for i, (text, number) in enumerate(zip(texts, numbers, strict=True)):
        try:
            record = next(reader)
        except csv.Error:
            record = None
        if reader.line_num != i + 1:
            raise NeedsRecordReader(f"line {number}: a quoted field runs on past the line end")
        if record is None or len(record) != shape.width:
            malformed.append((number, text))
            continue
        good.append(pick(record))
        good_lines.append(number)
    return (_table(good_lines, good) if good else None), malformed


def _write_malformed(staging: Path, malformed: list[tuple[int, str]]) -> None:
    with atomic_writer(staging / EXTRACT_MALFORMED, mode="wb") as out:
        pq.write_table(pa.table({"line": [n for n, _ in malformed],
                                 "raw": [raw for _, raw in malformed]}, schema=MALFORMED_SCHEMA),
                       out)


@contextlib.contextmanager
def _whole_fields() -> Iterator[None]:
    """The csv module without its field size limit (131,072 characters by default): past it
    the reader raised in the middle of a quoted field and went on to read the rest of that
    field as records of their own. A field is bounded by its file, as in the fast path."""
    previous = csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def _extract_by_records(path: Path, size: int, staging: Path) -> ExtractResult:
    """The csv module record by record: exact for any file (multi-line quoted fields, lone
    carriage returns, NUL characters) and the one that reports invalid UTF-8."""
    rows = 0
    malformed: list[tuple[int, int]] = []
    extra: list[str] = []
    with open(path, "rb") as handle, _whole_fields(), \
            atomic_writer(staging / EXTRACT_ROWS, mode="wb") as out:
        raw = file_fingerprint(handle)  # (this reader reads by lines: a pass of its own)
        digests = line_digests(handle) if raw["size"] <= LINE_DIGESTS_MAX_BYTES else None
        handle.seek(0)
        reader = csv.reader(_physical_lines(handle), strict=True)
        writer = None
        try:
            header = _read_header(reader, path)
            indexes, extra = _column_indexes(header, path)
            width = len(header)
            pick = operator.itemgetter(*indexes)
            writer = pq.ParquetWriter(out, ROWS_SCHEMA, **STAGED_WRITE)
            batch: list[tuple] = []
            lines: list[int] = []
            previous_end = reader.line_num
            while True:
                try:
                    record = next(reader)
                except StopIteration:
                    break
                except csv.Error:
                    rows += 1
                    malformed.append((previous_end + 1, reader.line_num))
                    previous_end = reader.line_num
                    continue
                start, previous_end = previous_end + 1, reader.line_num
                if not record:
                    continue
                rows += 1
                if len(record) != width:
                    malformed.append((start, previous_end))
                    continue
                batch.append(pick(record))
                lines.append(start)
                if len(batch) >= BATCH_ROWS:
                    writer.write_table(_table(lines, batch))
                    batch, lines = [], []
            if batch:
                writer.write_table(_table(lines, batch))
            writer.close()
        except UnicodeDecodeError as exc:
            if writer is not None:
                writer.close()  # before its file goes; a later close from __del__ would fail
            raise DataError(
                f"{path}: not valid UTF-8 at {_bad_utf8_location(path)} ({exc.reason}); "
                "nothing was loaded"
            ) from None
    texts = _raw_lines(path, malformed) if malformed else {}
    _write_malformed(staging, [(s, texts.get(s, "")) for s, _ in malformed])
    return ExtractResult(file=str(path), bytes=size, rows=rows, malformed=len(malformed),
                         extra_columns=extra, raw=raw, raw_lines=digests or "")


def _table(lines: list[int], batch: list[tuple]) -> pa.Table:
    columns = list(zip(*batch, strict=True))
    return pa.table([pa.array(lines, pa.int64())] + [pa.array(c, pa.string()) for c in columns],
                    schema=ROWS_SCHEMA)
