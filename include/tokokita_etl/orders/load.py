"""Load: one transaction per date: fact upsert, removal of vanished rows, summary, quarantine."""

from __future__ import annotations

import csv
import errno
import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from sqlalchemy import text

from tokokita_etl.files import atomic_writer
from tokokita_etl.orders.contract import (
    EXTRACT_ROWS,
    FACT_COLUMNS,
    OTHER_PARTITION,
    QUARANTINE_COLUMNS,
    REJECTED_ROWS,
    REPEATING_VALID_COLUMNS,
    REQUIRED_COLUMNS,
    SUMMARY_COLUMNS,
    VALID_ROWS,
)
from tokokita_etl.orders.schema import fact_pesanan, karantina
from tokokita_etl.warehouse.database import Warehouse

STAGE_FACT = "stage_fact"
KEY_COLUMNS = ("order_id", "kota", "line")  # staged when a new date's copy met a conflict
STAGE_QUARANTINE = "stage_quarantine"
BATCH_ROWS = 65_536
#: the fact columns a valid row has its own value of: every valid row's order_date is D (else
#: it was wrong_date), written as a constant
VARYING_FACT_COLUMNS = tuple(c for c in FACT_COLUMNS if c != "order_date")


@dataclass
class LoadResult:
    """What load wrote."""

    fact: int
    summary: int
    karantina: int
    removed: int
    conflicts: list[dict] = field(default_factory=list)  # {line, order_id, kota, other_date}
    #: the identity of the warehouse that took the rows and its revision after them
    warehouse: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


def load(warehouse: Warehouse, day: date, staging: Path, quarantine_file: Path) -> LoadResult:
    """Load staged rows of `day` in one transaction, then publish its quarantine file."""
    if quarantine_file.is_dir():
        # the file is renamed into place after the commit: a folder in its way is refused
        # before the warehouse changes
        raise IsADirectoryError(errno.EISDIR, "a folder is where the quarantine file goes",
                                str(quarantine_file))
    warehouse.ensure_schema()
    d = warehouse.day_param(day)
    with ThreadPoolExecutor(max_workers=1) as pool, \
            atomic_writer(quarantine_file, newline="") as qfile, warehouse.begin() as conn:
        # the summary and the quarantine need no warehouse: they are made on a second thread
        # while the database takes the fact rows, for the nightly case of no order_id held by
        # another date (made again when a conflict turns up). SQLite steps its multi-row
        # INSERTs without the GIL; beside executemany's single rows this thread had slowed
        # the insert (part 12 of bench/ANALYSIS.md)
        side = pool.submit(_side_rows, staging, day, d, [], as_text=warehouse.is_sqlite)
        if not warehouse.is_sqlite:
            # serialise loads so the cross-date order_id check cannot race another date's load
            conn.exec_driver_sql("LOCK TABLE fact_pesanan IN SHARE ROW EXCLUSIVE MODE")
        valid = pq.ParquetFile(staging / VALID_ROWS, read_dictionary=list(REPEATING_VALID_COLUMNS))
        # a date loaded for the first time (the nightly case): no fact row of the date exists
        # and the valid rows' order_ids are distinct, so the rows are copied straight into the
        # fact table, where only an order_id another date holds can stop them; such a copy is
        # undone and `_stage_fact` stages the keys to find the conflicts (staging the keys
        # first took 0.54 s of a 1M-row PostgreSQL load's 4.6 s). A date loaded again is
        # merged from a stage of whole rows (INSERT .. SELECT .. ON CONFLICT took longer than
        # the copy: on SQLite 4.9-5.4 s against 4.35-4.6 s for a 1M-row load)
        first_load = not conn.execute(text(
            "SELECT EXISTS (SELECT 1 FROM fact_pesanan WHERE order_date = :d)"),
            {"d": d}).scalar_one()
        fact = _copy_new_date(warehouse, conn, valid, day) if first_load else None
        if fact is None:
            conflicts = _stage_fact(warehouse, conn, valid, d, first_load=first_load)
            if conflicts:
                side = pool.submit(_side_rows, staging, day, d, conflicts,
                                   as_text=warehouse.is_sqlite)
            fact, removed = _write_fact(warehouse, conn, valid, day, conflicts,
                                        first_load=first_load)
        else:
            removed, conflicts = 0, []
        summary_rows, rejected, quarantine_csv = side.result()
        conn.execute(text("DELETE FROM summary_harian WHERE order_date = :d"), {"d": d})
        if summary_rows:
            conn.execute(text(
                f"INSERT INTO summary_harian ({', '.join(SUMMARY_COLUMNS)}) "
                f"VALUES ({', '.join(f':{c}' for c in SUMMARY_COLUMNS)})"), summary_rows)
        summary = len(summary_rows)

        conn.execute(text("DELETE FROM karantina WHERE order_date = :d"), {"d": d})
        warehouse.create_stage_table(conn, STAGE_QUARANTINE, QUARANTINE_COLUMNS)
        warehouse.bulk_insert(conn, STAGE_QUARANTINE, list(QUARANTINE_COLUMNS),
                              rejected.to_batches(max_chunksize=BATCH_ROWS))
        quarantine_values = ", ".join(warehouse.from_stage(karantina, c)
                                     for c in QUARANTINE_COLUMNS)
        conn.execute(text(f"INSERT INTO karantina ({', '.join(QUARANTINE_COLUMNS)}) "
                          f"SELECT {quarantine_values} FROM {STAGE_QUARANTINE}"))
        identity = warehouse.bump_revision(conn)
        qfile.write(quarantine_csv)
    return LoadResult(fact=fact, summary=summary, karantina=rejected.num_rows, removed=removed,
                      conflicts=conflicts, warehouse=identity)


def _stage_fact(warehouse: Warehouse, conn, valid: pq.ParquetFile, d: date | str, *,
                first_load: bool) -> list[dict]:
    """Stage the valid rows (only their keys for a `first_load`, a date with no fact row) and
    find the order_ids another date holds: the conflicts, by line."""
    stage_columns = [*VARYING_FACT_COLUMNS, "line"]
    staged = KEY_COLUMNS if first_load else stage_columns
    warehouse.create_stage_table(conn, STAGE_FACT, staged, integers=("line", "qty"))
    warehouse.bulk_insert(conn, STAGE_FACT, list(staged),
                          valid.iter_batches(batch_size=BATCH_ROWS, columns=list(staged)))
    if warehouse.is_sqlite and not first_load:
        # removing the date's vanished rows probes the stage by order_id for every fact
        # row of D: without an index SQLite scans the stage each time (a forced re-run of
        # a 1M-row date did not finish in 15 minutes)
        conn.exec_driver_sql(f"CREATE INDEX temp.ix_{STAGE_FACT}_order_id "
                             f"ON {STAGE_FACT} (order_id)")
    conflicts = [dict(r._mapping) for r in conn.execute(text(
        f"SELECT s.line, s.order_id, s.kota, f.order_date AS other_date FROM {STAGE_FACT} s "
        "JOIN fact_pesanan f ON f.order_id = s.order_id WHERE f.order_date <> :d "
        "ORDER BY s.line"), {"d": d})]
    for conflict in conflicts:
        conflict["other_date"] = str(conflict["other_date"])
    return conflicts


def _write_fact(warehouse: Warehouse, conn, valid: pq.ParquetFile, day: date,
                conflicts: list[dict], *, first_load: bool) -> tuple[int, int]:
    """After `_stage_fact`: insert the valid rows less the `conflicts` (`first_load`), or
    upsert them from the stage and remove the date's rows that vanished: the fact rows
    written and removed."""
    if first_load:
        return _insert_new_date(warehouse, conn, valid, day, conflicts), 0
    d = warehouse.day_param(day)
    if conflicts:
        conn.execute(text(
            f"DELETE FROM {STAGE_FACT} WHERE EXISTS (SELECT 1 FROM fact_pesanan f "
            f"WHERE f.order_id = {STAGE_FACT}.order_id AND f.order_date <> :d)"),
            {"d": d})
    removed = conn.execute(text(
        f"DELETE FROM fact_pesanan WHERE order_date = :d AND NOT EXISTS "
        f"(SELECT 1 FROM {STAGE_FACT} s WHERE s.order_id = fact_pesanan.order_id)"),
        {"d": d}).rowcount
    fact_values = [":d" if c == "order_date" else warehouse.from_stage(fact_pesanan, c)
                   for c in FACT_COLUMNS]
    updates = ", ".join(f"{c} = excluded.{c}" for c in FACT_COLUMNS if c != "order_id")
    fact = conn.execute(text(
        f"INSERT INTO fact_pesanan ({', '.join(FACT_COLUMNS)}) "
        f"SELECT {', '.join(fact_values)} FROM {STAGE_FACT} WHERE true "
        f"ON CONFLICT (order_id) DO UPDATE SET {updates}"), {"d": d}).rowcount
    return fact, removed


def _side_rows(staging: Path, day: date, d: date | str, conflicts: list[dict], *,
               as_text: bool) -> tuple[list[dict], pa.Table, str]:
    """What the date's summary and quarantine hold once the fact rows of D are the staged
    rows less `conflicts`: the summary rows, the quarantine rows and the quarantine file's
    text. The summary is summed from the staged rows in Arrow (exact decimals), not re-read
    from the fact table, so validate's fact-vs-summary totals compare two independent
    computations."""
    summary = _summary(pq.ParquetFile(staging / VALID_ROWS), d, conflicts, as_text=as_text)
    rejected = _quarantine_table(staging, day, conflicts)
    quarantine_csv = io.StringIO(newline="")
    _write_quarantine_csv(quarantine_csv, rejected)
    return summary, rejected, quarantine_csv.getvalue()


def _summary(valid: pq.ParquetFile, d: date | str, conflicts: list[dict], *,
             as_text: bool) -> list[dict]:
    """Per kota: rows, qty and exact bruto/bersih sums of the valid rows less the conflicts,
    streamed in batches (money as decimal128, never floating point; text with two decimals
    for SQLite, Decimal for PostgreSQL)."""
    excluded = pa.array([c["line"] for c in conflicts], pa.int64())
    totals: dict[str, list] = {}
    money = pa.decimal128(18, 2)
    for batch in valid.iter_batches(batch_size=BATCH_ROWS,
                                    columns=["kota", "qty", "bruto", "bersih", "line"]):
        table = pa.Table.from_batches([batch])
        if conflicts:
            table = table.filter(pc.invert(pc.is_in(table["line"], value_set=excluded)))
        for name in ("bruto", "bersih"):
            table = table.set_column(table.schema.get_field_index(name), name,
                                     pc.cast(table[name], money))
        grouped = table.group_by("kota").aggregate(
            [("line", "count"), ("qty", "sum"), ("bruto", "sum"), ("bersih", "sum")])
        for kota, n, qty, bruto, bersih in zip(*(grouped[c].to_pylist() for c in (
                "kota", "line_count", "qty_sum", "bruto_sum", "bersih_sum")), strict=True):
            acc = totals.setdefault(kota, [0, 0, Decimal(0), Decimal(0)])
            acc[0] += n
            acc[1] += qty
            acc[2] += bruto
            acc[3] += bersih

    def money_value(amount: Decimal) -> str | Decimal:
        return f"{amount:.2f}" if as_text else amount

    return [{"order_date": d, "kota": kota, "jumlah_pesanan": n, "total_qty": qty,
             "bruto": money_value(bruto), "bersih": money_value(bersih)}
            for kota, (n, qty, bruto, bersih) in sorted(totals.items())]


def _copy_new_date(warehouse: Warehouse, conn, valid: pq.ParquetFile, day: date) -> int | None:
    """Copy the valid rows of a date with no fact row yet into the fact table: how many, or
    None, with nothing written, when another date holds one of their order_ids."""
    return warehouse.insert_new_keys(conn, "fact_pesanan", list(VARYING_FACT_COLUMNS),
                                     _new_date_rows(valid, []),
                                     constants={"order_date": day.isoformat()})


def _insert_new_date(warehouse: Warehouse, conn, valid: pq.ParquetFile, day: date,
                     conflicts: list[dict]) -> int:
    """Insert the rows of a date with no fact row yet, less the cross-date conflicts: no
    staged order_id can be in the fact table otherwise, so nothing needs merging."""
    return warehouse.bulk_insert(conn, "fact_pesanan", list(VARYING_FACT_COLUMNS),
                                 _new_date_rows(valid, conflicts),
                                 constants={"order_date": day.isoformat()})


def _new_date_rows(valid: pq.ParquetFile, conflicts: list[dict]) -> Iterator[pa.RecordBatch]:
    """The valid rows' `VARYING_FACT_COLUMNS` in batches, less the conflicts' lines."""
    if not conflicts:
        yield from valid.iter_batches(batch_size=BATCH_ROWS, columns=list(VARYING_FACT_COLUMNS))
        return
    excluded = pa.array([c["line"] for c in conflicts], pa.int64())
    for batch in valid.iter_batches(batch_size=BATCH_ROWS,
                                    columns=[*VARYING_FACT_COLUMNS, "line"]):
        yield batch.filter(pc.invert(pc.is_in(batch["line"], value_set=excluded)))


def _quarantine_table(staging: Path, day: date, conflicts: list[dict]) -> pa.Table:
    """Rejected rows from transform plus the cross-partition conflicts, sorted by line."""
    rejected = pq.read_table(staging / REJECTED_ROWS).select(list(QUARANTINE_COLUMNS))
    if not conflicts:
        return rejected
    lines = pa.array([c["line"] for c in conflicts], pa.int64())
    raw = pq.read_table(staging / EXTRACT_ROWS)
    raw = raw.filter(pc.is_in(raw["line"], value_set=lines))
    extra = pa.table({
        "order_date": [day.isoformat()] * raw.num_rows,
        "line": raw["line"],
        "reason": [OTHER_PARTITION] * raw.num_rows,
        **{c: raw[c] for c in REQUIRED_COLUMNS},
        "raw": [""] * raw.num_rows,
    }).cast(rejected.schema)
    return pa.concat_tables([rejected, extra]).sort_by("line")


def _write_quarantine_csv(handle, table: pa.Table) -> None:
    """The quarantine rows as CSV: minimal quoting, except that a row with a carriage return
    in a field is written with every field quoted (with `\n` line ends `csv` would leave a
    lone CR unquoted, and a reader would split the row there)."""
    minimal = csv.writer(handle, lineterminator="\n")
    quoted = csv.writer(handle, lineterminator="\n", quoting=csv.QUOTE_ALL)
    minimal.writerow(QUARANTINE_COLUMNS)
    for batch in table.to_batches(max_chunksize=BATCH_ROWS):
        rows = zip(*(batch.column(c).to_pylist() for c in QUARANTINE_COLUMNS), strict=True)
        with_cr = _rows_with_carriage_return(batch)
        if with_cr is None:
            minimal.writerows(rows)
            continue
        for row, has_cr in zip(rows, with_cr, strict=True):
            (quoted if has_cr else minimal).writerow(row)


def _rows_with_carriage_return(batch: pa.RecordBatch) -> list[bool] | None:
    """Which rows of `batch` hold a carriage return in a text field (None: none does)."""
    found = None
    for name in QUARANTINE_COLUMNS:
        column = batch.column(name)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            hit = pc.fill_null(pc.match_substring(column, "\r"), False)
            found = hit if found is None else pc.or_(found, hit)
    if found is None or not pc.any(found).as_py():
        return None
    return found.to_pylist()
