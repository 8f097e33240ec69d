"""Fault injection: the quarantine file of a date holds exactly the rows the warehouse's
`karantina` table holds for that date, over fuzzed bad partitions, on both backends.

Load writes both from one table of rejected rows, in one transaction and one atomic file
replacement. The property, checked after every run whatever its exit code: when
`karantina_D.csv` exists, read back with Python's `csv` module it has the contract's header
and the same rows as `SELECT ... FROM karantina WHERE order_date = D ORDER BY line` (same
count, same line numbers and reasons, same field values; NULL reads as an empty field);
when it does not exist the table has no row of D.

Every partition is a generated one (0 to 60 orders, up to 80% dirty rows) run through the
fuzzer of test_fuzzed_partitions.py and faults of its own: an escaped quote inside a quoted
field, a line holding only `\\.` (PostgreSQL's COPY end-of-data marker) inside a quoted
field, empty quoted fields, and orders of an earlier date (the cross-partition conflicts load
adds itself). All dates share one warehouse; some runs are forced re-runs of an earlier date
with a new partition, so a date's rows are replaced.

Found by this property (seed 20261110, run 0 on both backends), fixed: a quarantined field
holding a lone carriage return, such as a quoted `kota` `"Jakarta Timur\rBarat"` on a row
with a bad price, was kept as it is in the table but written unquoted to the file (Python's
`csv` writer with `lineterminator="\n"` quotes a field for `\n`, not for `\r`), so a reader
read two records. Such a row is now written with every field quoted; the fuzz makes that
fault too, and the regression test below pins it.

Quick mode: 25 runs per backend. `TOKOKITA_FAULTS=long`: 1,000 (`TOKOKITA_QUARANTINE_RUNS`
overrides the count, `TOKOKITA_FAULTS_SEED` the seed).
"""

from __future__ import annotations

import csv
import os
import random
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from sqlalchemy import text

from devtools.samples import generate_partition
from tests.conftest import in_process_cli
from tests.faults.conftest import LONG
from tests.faults.test_fuzzed_partitions import _mutate
from tokokita_etl.orders.contract import QUARANTINE_COLUMNS
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.warehouse.database import Warehouse

FIRST_DAY = date(2026, 1, 1)
CLOCK = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
RUNS = int(os.environ.get("TOKOKITA_QUARANTINE_RUNS") or (1_000 if LONG else 25))
SEED = int(os.environ.get("TOKOKITA_FAULTS_SEED") or 20261110)


def _own_fault(data: bytes, rng: random.Random, day: date, earlier: list[bytes]) -> bytes:
    """One fault the generic fuzzer does not make."""
    lines = data.split(b"\n")
    at = rng.randrange(1, len(lines)) if len(lines) > 2 else None
    kind = rng.randrange(0, 5)
    if at is None or not lines[at]:
        return data
    fields = lines[at].split(b",")
    if kind == 0 and len(fields) > 3:  # a lone CR inside a quoted kota
        fields[3] = b'"' + fields[3].replace(b'"', b"") + b'\rBarat"'
    elif kind == 1 and len(fields) > 4:  # an escaped quote in a quoted produk
        fields[4] = b'"Kaos ""Polos"" ' + fields[4].replace(b'"', b"") + b'"'
    elif kind == 2 and len(fields) > 3:  # \. alone on a line inside a quoted field
        fields[3] = b'"' + fields[3].replace(b'"', b"") + b'\n\\.\n"'
    elif kind == 3:  # empty quoted fields
        fields = [b'""' if rng.random() < 0.3 else f for f in fields]
    elif earlier:  # an order of an earlier date, dated today: in another partition
        stolen = rng.choice(earlier)
        lines.insert(at, stolen)
        return b"\n".join(lines)
    lines[at] = b",".join(fields)
    return b"\n".join(lines)


def _partition(rng: random.Random, day: date, seed_path: Path,
               earlier: list[bytes]) -> tuple[bytes, list[bytes]]:
    """A bad partition of `day`, and some valid lines of it re-dated for later dates."""
    generate_partition(seed_path, day, rng.randint(0, 60), seed=rng.randrange(10**6),
                       dirt=rng.choice([0.03, 0.3, 0.8]), duplicates=0.1)
    clean = seed_path.read_bytes()
    data = clean
    if rng.random() < 0.6:
        data = _mutate(data, rng)
    for _ in range(rng.randint(0, 3)):
        data = _own_fault(data, rng, day, earlier)
    later = day + timedelta(days=1)
    donors = [line.replace(day.isoformat().encode(), later.isoformat().encode())
              for line in clean.split(b"\n")[1:6] if line]
    return data, donors


def _table_rows(warehouse: Warehouse, day: date) -> list[list[str]]:
    with warehouse.begin() as conn:
        rows = conn.execute(text(
            f"SELECT {', '.join(QUARANTINE_COLUMNS)} FROM karantina WHERE order_date = :d "
            "ORDER BY line"), {"d": warehouse.day_param(day)}).all()
    return [["" if v is None else str(v) for v in row] for row in rows]


def _file_rows(path: Path) -> list[list[str]] | None:
    if not path.exists():
        return None
    limit = csv.field_size_limit(sys.maxsize)  # the fuzzer makes fields of 200,000 bytes
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
    finally:
        csv.field_size_limit(limit)
    assert rows and rows[0] == list(QUARANTINE_COLUMNS), rows[:1]
    return rows[1:]


def _difference(file_rows: list[list[str]] | None,
                      table_rows: list[list[str]]) -> str | None:
    if file_rows is None:
        return f"no file, {len(table_rows)} table rows" if table_rows else None
    if len(file_rows) != len(table_rows):
        return f"{len(file_rows)} file rows, {len(table_rows)} table rows"
    keys = [(row[1], row[2]) for row in file_rows]
    table_keys = [(row[1], row[2]) for row in table_rows]
    if keys != table_keys:
        diff = next(n for n, (a, b) in enumerate(zip(keys, table_keys, strict=True)) if a != b)
        return f"row {diff}: file (line, reason) {keys[diff]}, table {table_keys[diff]}"
    for a, b in zip(file_rows, table_rows, strict=True):
        if a != b:
            return f"line {a[1]}: file {a!r}, table {b!r}"
    return None


def test_quarantine_file_holds_the_rows_of_the_quarantine_table(
        workspace, monkeypatch, capsys):
    """Guards the two copies of the quarantined rows against drifting apart: a row the file
    has and the table lacks (or the reverse), a different line number or reason, a field
    the database or the CSV writer changed, a file left from an earlier run of the date."""
    ws = workspace
    rng = random.Random(f"{SEED}:{ws.warehouse_url.split(':')[0]}")
    ORDERS.declare_tables()
    warehouse = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    warehouse.ensure_schema()  # a date whose first run fails before load has an empty table
    call = in_process_cli(ws, monkeypatch, capsys, CLOCK)
    problems: list[str] = []
    days: list[date] = []
    donors: list[bytes] = []
    rows_seen = exits = 0
    for n in range(RUNS):
        rerun = bool(days) and rng.random() < 0.2
        day = rng.choice(days) if rerun else FIRST_DAY + timedelta(days=len(days))
        data, new_donors = _partition(rng, day, ws.root / "seed.csv", donors)
        ws.write_partition(day, data)
        code, _, err = call("run", "--date", day.isoformat(), *(["--force"] if rerun else []))
        assert "Traceback" not in err, err
        exits += code == 0
        if not rerun:
            days.append(day)
        donors = new_donors if code == 0 else donors
        table_rows = _table_rows(warehouse, day)
        rows_seen += len(table_rows)
        difference = _difference(_file_rows(ws.quarantine_file(day)), table_rows)
        if difference:
            problems.append(f"run {n} ({day}, exit {code}, seed {SEED}): {difference}")
    print(f"\n{RUNS} runs on {len(days)} dates, {exits} succeeded, {rows_seen} quarantined rows "
          f"compared, {len(problems)} disagreements")
    assert not problems, "\n".join(problems[:20])


LONE_CR = (b"order_id,order_ts,customer_id,kota,produk,qty,harga_satuan,diskon\n"
           b'TK-1,2026-11-10 10:40:00,CUST-1,"Jakarta Timur\rBarat",Mukena Katun,1,abc,10500\n'
           b"TK-2,2026-11-10 11:00:00,CUST-2,Depok,Kabel Data,1,70000,0\n")


def test_a_quarantined_field_with_a_lone_carriage_return_is_one_row_of_the_file(
        workspace, monkeypatch, capsys):
    """Regression: the quarantine file and the table disagreed on a row whose quoted `kota`
    holds a lone carriage return (bad price on line 2): the table kept the one row, the file
    read back had two (`csv` left the CR unquoted with `\n` line ends)."""
    ws = workspace
    ws.write_partition(date(2026, 11, 10), LONE_CR)
    code, _, err = in_process_cli(ws, monkeypatch, capsys, CLOCK)("run", "--date", "2026-11-10")
    assert code == 0, err
    table_rows = _table_rows(Warehouse(ws.warehouse_url, "Asia/Jakarta"), date(2026, 11, 10))
    assert [(row[1], row[2], row[6]) for row in table_rows] == [
        ("2", "bad_price", "Jakarta Timur\rBarat")]
    assert _file_rows(ws.quarantine_file(date(2026, 11, 10))) == table_rows
