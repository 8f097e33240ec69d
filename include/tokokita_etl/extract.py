"""Extract: stream the raw CSV partition into a columnar staging file."""

from __future__ import annotations

import csv
import logging
import operator
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tokokita_etl.config import partition_path
from tokokita_etl.contract import EXTRACT_MALFORMED, EXTRACT_ROWS, REQUIRED_COLUMNS
from tokokita_etl.errors import DataError, MissingPartitionError
from tokokita_etl.files import atomic_writer

log = logging.getLogger(__name__)
BATCH_ROWS = 65_536
ROWS_SCHEMA = pa.schema([("line", pa.int64())] + [(c, pa.string()) for c in REQUIRED_COLUMNS])
MALFORMED_SCHEMA = pa.schema([("line", pa.int64()), ("raw", pa.string())])


@dataclass
class ExtractResult:
    """What extract read."""

    file: str
    bytes: int
    rows: int  # data records, malformed ones included
    malformed: int
    extra_columns: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


def _read_header(reader, path: Path) -> list[str]:
    try:
        for header in reader:
            if header:
                return [name.strip() for name in header]
    except csv.Error as exc:
        raise DataError(f"{path}: header line has broken quoting ({exc})") from None
    raise DataError(f"{path}: no header row (the file has no records)")


def _column_indexes(header: list[str], path: Path) -> tuple[list[int], list[str]]:
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise DataError(f"{path}: header names column {name!r} twice")
        seen.add(name)
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise DataError(
            f"{path}: missing required column(s) {', '.join(missing)} in header line 1 "
            f"(found: {', '.join(header)})"
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


def _raw_lines(path: Path, wanted: list[tuple[int, int]]) -> dict[int, str]:
    """Re-read the physical lines of the malformed records (rare, so a second pass is cheap)."""
    spans = dict(wanted)
    out: dict[int, str] = {}
    current: int | None = None
    with open(path, encoding="utf-8-sig", newline="") as handle:
        for number, text in enumerate(handle, start=1):
            if current is None and number in spans:
                current, out[number] = number, ""
            if current is not None:
                out[current] += text
                if number >= spans[current]:
                    out[current] = out[current].rstrip("\r\n")
                    current = None
    return out


def extract(raw_dir: Path, day: date, staging: Path) -> ExtractResult:
    """Read partition `day` into `staging/extract.parquet` (+ malformed records)."""
    path = partition_path(raw_dir, day)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise MissingPartitionError(f"{path}: partition {day} does not exist") from None
    if size == 0:
        raise MissingPartitionError(f"{path}: partition {day} is empty (0 bytes)")

    staging.mkdir(parents=True, exist_ok=True)
    rows = 0
    malformed: list[tuple[int, int]] = []
    extra: list[str] = []
    with open(path, encoding="utf-8-sig", newline="") as handle, \
            atomic_writer(staging / EXTRACT_ROWS, mode="wb") as out:
        reader = csv.reader(handle, strict=True)
        writer = None
        try:
            header = _read_header(reader, path)
            indexes, extra = _column_indexes(header, path)
            width = len(header)
            pick = operator.itemgetter(*indexes)
            writer = pq.ParquetWriter(out, ROWS_SCHEMA)
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
    malformed_count = len(malformed)
    raw = _raw_lines(path, malformed) if malformed else {}
    with atomic_writer(staging / EXTRACT_MALFORMED, mode="wb") as out:
        pq.write_table(
            pa.table({"line": [s for s, _ in malformed], "raw": [raw.get(s, "") for s, _ in malformed]},
                     schema=MALFORMED_SCHEMA),
            out,
        )
    if extra:
        log.warning("%s: ignoring extra column(s): %s", path, ", ".join(extra))
    return ExtractResult(file=str(path), bytes=size, rows=rows, malformed=malformed_count,
                         extra_columns=extra)


def _table(lines: list[int], batch: list[tuple]) -> pa.Table:
    columns = list(zip(*batch, strict=True))
    return pa.table([pa.array(lines, pa.int64())] + [pa.array(c, pa.string()) for c in columns],
                    schema=ROWS_SCHEMA)
