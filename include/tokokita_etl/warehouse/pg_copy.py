"""PostgreSQL's binary COPY format made from Arrow batches, column by column.

The server takes a binary row for less than its text (it parses no timestamp, no amount):
a new date's load went from 4.4-5.1 s to 3.3-4.0 s at 1M rows and from 1.25-1.49 s to
0.97-1.24 s at 300k (bench/ANALYSIS.md, part 20). psycopg writes binary COPY one
Python row at a time (`Copy.write_row`, each value a Python object first), and no maintained
library turns Arrow columns into it on the connection's own transaction, so it is made here
with Arrow's kernels: each column becomes a binary array of its fields (length and value, in
network byte order), a dictionary column's from its dictionary once, and one `take` lays the
fields of each row side by side.

The format (PostgreSQL's documentation, COPY, "Binary Format"): a signature and header, then
per row a 16-bit field count and per field a 32-bit length and the value in the type's
binary form (`-1` and no value for NULL), then a 16-bit -1. The values used here: `text` its
UTF-8 bytes, `int4`/`int8` two's complement, `date` days since 2000-01-01, `timestamptz`
microseconds since 2000-01-01 00:00 UTC, `numeric` a digit count, the first digit's weight,
a sign, the display scale and base-10000 digits (the server strips zero digits).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # no flags, no header extension
TRAILER = b"\xff\xff"
PG_EPOCH_DAYS = 10_957  # 2000-01-01 in days since 1970-01-01
PG_EPOCH_US = PG_EPOCH_DAYS * 86_400 * 1_000_000
NUMERIC_NEGATIVE = 0x4000
NULL_FIELD = (-1).to_bytes(4, "big", signed=True)
#: the widest unscaled numeric whose 128-bit decimal holds it in its low 64 bits
MAX_NUMERIC_PRECISION = 18
KINDS = ("text", "int4", "int8", "date", "timestamptz", "numeric")
_SWAP = sys.byteorder == "little"
_ARRAY_CODES = {2: "h", 4: "i", 8: "q"}


class Field(NamedTuple):
    """A column as COPY sends it: its name, its PostgreSQL type (one of `KINDS`) and, for
    `numeric`, its precision and scale."""

    name: str
    kind: str
    precision: int = 0
    scale: int = 0


def encode_rows(batch: pa.RecordBatch, fields: Sequence[Field],
                constants: Mapping[str, object] | None = None) -> memoryview:
    """The binary COPY rows of `batch`: `fields` in order, each from the batch's column of
    that name or, for a name in `constants`, the same value in every row (a str for text,
    else the type's Python value or its ISO text; None for NULL). Raises ValueError naming
    the column when a value does not fit its type."""
    constants = dict(constants or {})
    rows = batch.num_rows
    if rows == 0:
        return memoryview(b"")
    pieces: list[Piece] = [Piece(_constant(len(fields).to_bytes(2, "big")))]
    for field in fields:
        if field.kind not in KINDS:
            raise ValueError(f"column {field.name}: no binary COPY encoding for {field.kind}")
        if field.name in constants:
            pieces.append(Piece(_constant(_constant_field(field, constants[field.name]))))
            continue
        column = batch.column(field.name)
        if pa.types.is_dictionary(column.type) and column.dictionary.null_count:
            column = column.dictionary_decode()
        if pa.types.is_dictionary(column.type):
            # the dictionary's values encoded once, each row taking its own
            values = _join_rows(_field_pieces(column.dictionary, field), len(column.dictionary))
            which = column.indices
        elif column.null_count and field.kind != "text":
            # the values encoded without the NULLs, each row taking its own (its rank among
            # them) or the NULL field
            values = _join_rows(_field_pieces(column.drop_null(), field),
                                len(column) - column.null_count)
            which = pc.subtract(pc.cumulative_sum(column.is_valid().cast(pa.int64())), 1)
        else:
            pieces.extend(Piece(p, ROW if len(p) == rows else None)
                          for p in _field_pieces(column, field))
            continue
        if column.null_count:
            which = pc.if_else(column.is_valid(), which.cast(pa.int64()), len(values))
            values = pa.concat_arrays([values, _constant(NULL_FIELD)])
        pieces.append(Piece(values, which))
    joined = _join_rows(_merge_constants(pieces), rows)
    offsets = memoryview(joined.buffers()[1]).cast("i")
    return memoryview(joined.buffers()[2])[offsets[joined.offset]:offsets[joined.offset + rows]]


def _merge_constants(pieces: list[Piece]) -> list[Piece]:
    """`pieces` with each run of one-value pieces made one piece (fewer values to gather)."""
    merged: list[Piece] = []
    for piece in pieces:
        if piece.rows is None and merged and merged[-1].rows is None:
            merged[-1] = Piece(_constant(merged[-1].values[0].as_py() + piece.values[0].as_py()))
        else:
            merged.append(piece)
    return merged


def _constant(value: bytes) -> pa.Array:
    return pa.array([value], pa.binary())


def _constant_field(field: Field, value: object) -> bytes:
    """One field (length and value) of `field`'s type from a Python value or its text."""
    if value is None:
        return NULL_FIELD
    return _join_rows(_field_pieces(pa.array([value]), field), 1)[0].as_py()


def _field_pieces(column: pa.Array, field: Field) -> list[pa.Array]:
    """Binary arrays (each as long as `column`, or one value for all rows) that side by side
    hold each row's field of `column` as `field`'s type."""
    if field.kind == "text":
        return _text_pieces(column, field)
    if column.null_count:  # encode_rows gives these only the values
        raise ValueError(f"column {field.name}: NULLs among fixed-width {field.kind} values")
    try:
        if field.kind in ("int4", "int8"):
            values = column.cast(pa.int32() if field.kind == "int4" else pa.int64())
            width = 4 if field.kind == "int4" else 8
        elif field.kind == "date":
            days = _as(column, pa.date32()).cast(pa.int32())
            values, width = pc.subtract_checked(days, pa.scalar(PG_EPOCH_DAYS, pa.int32())), 4
        elif field.kind == "timestamptz":
            stamps = _instants(column).cast(pa.int64())
            values, width = pc.subtract_checked(stamps, PG_EPOCH_US), 8
        else:
            return [_numeric_piece(column, field)]
    except (ValueError, pa.ArrowNotImplementedError) as exc:  # ArrowInvalid is a ValueError
        raise ValueError(f"column {field.name}: not a {field.kind} value ({exc})") from None
    return [_constant(width.to_bytes(4, "big")), _fixed_width(_big_endian(values, width), width)]


NAIVE_TIMESTAMP = "a timestamp without a time zone is no timestamptz value"


def _as(column: pa.Array, target: pa.DataType) -> pa.Array:
    """`column` cast to `target`; text as ISO 8601 (a timestamp's with its UTC offset)."""
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(column.type) \
            and column.type.tz is None:
        raise ValueError(NAIVE_TIMESTAMP)
    return column.cast(target)


def _instants(column: pa.Array) -> pa.Array:
    """`column` as UTC instants (`_as`). Arrow reads UTC offsets to the minute; a column
    that holds an offset with seconds (a zone's local mean time, such as Jakarta's +07:07:12
    before 1924) is read value by value by Python's `datetime.fromisoformat`."""
    target = pa.timestamp("us", tz="UTC")
    try:
        return _as(column, target)
    except pa.ArrowInvalid:
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise
    stamps = [None if text is None else datetime.fromisoformat(text)
              for text in column.to_pylist()]
    if any(stamp is not None and stamp.tzinfo is None for stamp in stamps):
        raise ValueError(NAIVE_TIMESTAMP)
    return pa.array(stamps, target)


def _text_pieces(column: pa.Array, field: Field) -> list[pa.Array]:
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise ValueError(f"column {field.name}: text expected, found {column.type}")
    lengths = pc.binary_length(column)
    if column.null_count:
        lengths = lengths.fill_null(-1)
        column = column.fill_null("")
    return [_fixed_width(_big_endian(lengths.cast(pa.int32()), 4), 4),
            column.cast(pa.binary())]


def _numeric_piece(column: pa.Array, field: Field) -> pa.Array:
    """Each row's numeric field: length, header and as many base-10000 digits as the largest
    value of `column` needs (a fixed width, so the rows are one buffer)."""
    if not 0 <= field.scale <= 4 or field.precision > MAX_NUMERIC_PRECISION:
        raise ValueError(f"column {field.name}: numeric({field.precision}, {field.scale}) is "
                         f"encoded up to precision {MAX_NUMERIC_PRECISION} and scale 4")
    decimals = column.cast(pa.decimal128(field.precision, field.scale))
    low_words = array("q")  # a 128-bit decimal's low 64 bits hold any value of precision 18
    low_words.frombytes(memoryview(decimals.buffers()[1])[16 * decimals.offset:
                                                          16 * (decimals.offset + len(decimals))])
    unscaled = _int64_array(low_words[0::2])
    negative = pc.less(unscaled, 0)
    any_negative = pc.any(negative).as_py()
    magnitude = pc.abs(unscaled) if any_negative else unscaled
    whole = pc.divide(magnitude, 10 ** field.scale)
    fraction = pc.multiply(pc.subtract(magnitude, pc.multiply(whole, 10 ** field.scale)),
                           10 ** (4 - field.scale))
    largest = pc.max(whole).as_py() or 0
    groups = max(1, (len(str(largest)) + 3) // 4)
    digits: list[pa.Array] = []
    rest = whole
    for _ in range(groups):  # the least significant group first
        higher = pc.divide(rest, 10_000)
        digits.insert(0, pc.subtract(rest, pc.multiply(higher, 10_000)))
        rest = higher
    if field.scale:
        digits.append(fraction)
    width = 8 + 2 * len(digits)
    head = (width.to_bytes(4, "big") + len(digits).to_bytes(2, "big")
            + (groups - 1).to_bytes(2, "big") + bytes(2) + field.scale.to_bytes(2, "big"))
    rows = len(column)
    out = bytearray(head + bytes(width - 8)) * rows
    stride = len(head) + 2 * len(digits)
    if any_negative:
        sign = pc.multiply(negative.cast(pa.int16()), NUMERIC_NEGATIVE)
        _scatter(out, 8, stride, _big_endian(sign.cast(pa.int16()), 2), 2)
    for place, digit in enumerate(digits):
        _scatter(out, 12 + 2 * place, stride, _big_endian(digit.cast(pa.int16()), 2), 2)
    return _fixed_width(out, stride)


def _scatter(out: bytearray, start: int, stride: int, values: bytes, width: int) -> None:
    """Write each `width`-byte value of `values` at `start` of its `stride`-byte row."""
    for byte in range(width):
        out[start + byte::stride] = values[byte::width]


def _big_endian(values: pa.Array, width: int) -> bytes:
    """The integers of `values` (no NULLs, `width` bytes each) in network byte order."""
    if values.type.bit_width != 8 * width:
        raise TypeError(f"{values.type} values are not {width} bytes wide")
    data = array(_ARRAY_CODES[width])
    data.frombytes(memoryview(values.buffers()[1])[width * values.offset:
                                                   width * (values.offset + len(values))])
    if _SWAP:
        data.byteswap()
    return data.tobytes()


def _fixed_width(data: bytes | bytearray, width: int) -> pa.Array:
    """A binary array whose values are `data`'s consecutive `width`-byte pieces."""
    rows = len(data) // width
    return pa.Array.from_buffers(pa.binary(), rows,
                                 [None, _offsets(rows, width), pa.py_buffer(data)])


def _offsets(rows: int, width: int) -> pa.Buffer:
    """The offsets of `rows` values of `width` bytes each."""
    return pc.multiply(_row_numbers(rows + 1), width).cast(pa.int32()).buffers()[1]


class Piece(NamedTuple):
    """Binary values and which of them each row takes: its own (ROW), the one value of a
    one-value piece (None), or the value its index names (an integer array)."""

    values: pa.Array
    rows: pa.Array | str | None = None


ROW = "row"


def _join_rows(pieces: Sequence[Piece | pa.Array], rows: int) -> pa.Array:
    """One binary array of `rows` values, each the concatenation of that row's value of every
    piece in order. A plain array is a piece of its own rows, or of one value for all rows."""
    pieces = [p if isinstance(p, Piece) else Piece(p, ROW if len(p) == rows else None)
              for p in pieces]
    if len(pieces) == 1 and pieces[0].rows == ROW:
        return pieces[0].values
    count, start = len(pieces), 0
    order = array("q", bytes(8 * rows * count))  # the concatenation's index of each value
    for place, piece in enumerate(pieces):
        if piece.rows is None:
            order[place::count] = array("q", [start]) * rows
        else:
            taken = _row_numbers(rows) if piece.rows == ROW else piece.rows.cast(pa.int64())
            order[place::count] = _int64s(pc.add(taken, start) if start else taken)
        start += len(piece.values)
    taken = pa.concat_arrays([p.values for p in pieces]).take(_int64_array(order))
    offsets = array("i")  # every count-th: where each row's values begin
    offsets.frombytes(memoryview(taken.buffers()[1])[4 * taken.offset:
                                                     4 * (taken.offset + len(taken) + 1)])
    return pa.Array.from_buffers(pa.binary(), rows,
                                 [None, pa.py_buffer(offsets[::count]), taken.buffers()[2]])


def _row_numbers(rows: int) -> pa.Array:
    """0 .. rows-1 as int64."""
    return _counting(max(rows, 65_536)).slice(0, rows)


@lru_cache(maxsize=2)
def _counting(rows: int) -> pa.Array:
    return _int64_array(array("q", range(rows)))


def _int64s(values: pa.Array) -> array:
    """An int64 array's values (no NULLs) as a Python array."""
    out = array("q")
    out.frombytes(memoryview(values.buffers()[1])[8 * values.offset:
                                                  8 * (values.offset + len(values))])
    return out


def _int64_array(values: array) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])
