"""Reference implementation: the orders data contract written the plain way.

One row loop with the `csv` module, `Decimal` and `zoneinfo`, a dict for
de-duplication, one INSERT per row inside one transaction (SQLite through
`sqlite3` or PostgreSQL through `psycopg`), the daily summary computed in
Python, and the gold and quarantine files written with `csv`. It follows
docs/decisions.md to the letter: the tests use it as a differential oracle,
the benchmarks as the plain-Python baseline the pipeline is measured against.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import os
import re
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

log = logging.getLogger(__name__)

JAKARTA = ZoneInfo("Asia/Jakarta")
REQUIRED = (
    "order_id",
    "order_ts",
    "customer_id",
    "kota",
    "produk",
    "qty",
    "harga_satuan",
    "diskon",
)
REASONS = (
    "missing_order_id",
    "bad_order_ts",
    "wrong_date",
    "missing_kota",
    "bad_qty",
    "bad_price",
    "bad_discount",
    "order_id_in_other_partition",
    "malformed_row",
)
GOLD_HEADER = ("order_date", "kota", "jumlah_pesanan", "total_qty", "bruto", "bersih")
QUARANTINE_HEADER = ("order_date", "line", "reason", *REQUIRED, "raw")
FACT_TABLE = "reference_fact"
SUMMARY_TABLE = "reference_summary"

BOM = b"\xef\xbb\xbf"
TS_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,6}))?(Z|[+-][0-9]{2}:[0-9]{2})?"
)
INT_RE = re.compile(r"[0-9]+")
MONEY_RE = re.compile(r"[0-9]+(?:\.[0-9]{1,2})?")
MAX_QTY = 2_147_483_647
MAX_BRUTO = Decimal(10) ** 16  # NUMERIC(18,2) holds less than this

DDL = {
    "sqlite": (
        f"""CREATE TABLE IF NOT EXISTS {FACT_TABLE} (
            order_id TEXT PRIMARY KEY, order_date TEXT NOT NULL, order_ts TEXT NOT NULL,
            customer_id TEXT NOT NULL, kota TEXT NOT NULL, produk TEXT NOT NULL,
            qty INTEGER NOT NULL, harga_satuan TEXT NOT NULL, diskon TEXT NOT NULL,
            bruto TEXT NOT NULL, bersih TEXT NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS {SUMMARY_TABLE} (
            order_date TEXT NOT NULL, kota TEXT NOT NULL, jumlah_pesanan INTEGER NOT NULL,
            total_qty INTEGER NOT NULL, bruto TEXT NOT NULL, bersih TEXT NOT NULL,
            PRIMARY KEY (order_date, kota))""",
    ),
    "postgresql": (
        f"""CREATE TABLE IF NOT EXISTS {FACT_TABLE} (
            order_id TEXT COLLATE "C" PRIMARY KEY, order_date DATE NOT NULL,
            order_ts TIMESTAMPTZ NOT NULL, customer_id TEXT NOT NULL,
            kota TEXT COLLATE "C" NOT NULL, produk TEXT NOT NULL, qty INTEGER NOT NULL,
            harga_satuan NUMERIC(18,2) NOT NULL, diskon NUMERIC(18,2) NOT NULL,
            bruto NUMERIC(18,2) NOT NULL, bersih NUMERIC(18,2) NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS {SUMMARY_TABLE} (
            order_date DATE NOT NULL, kota TEXT COLLATE "C" NOT NULL,
            jumlah_pesanan INTEGER NOT NULL, total_qty BIGINT NOT NULL,
            bruto NUMERIC(24,2) NOT NULL, bersih NUMERIC(24,2) NOT NULL,
            PRIMARY KEY (order_date, kota))""",
    ),
}


class ReferenceDataError(ValueError):
    """The whole partition cannot be loaded (bad encoding, header or file)."""


@contextlib.contextmanager
def _whole_fields() -> Iterator[None]:
    """A field may be as long as its file: the csv module's limit (131,072 characters) would
    end a long quoted field in its middle and read the rest of it as records."""
    previous = csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(previous)


class _Records:
    """csv records of a raw file with their first physical line and raw text."""

    def __init__(self, path: Path, handle: Any) -> None:
        self.path = path
        self.handle = handle
        self.line_no = 0
        self.offset = 0
        self.pending: list[str] = []
        self.reader = csv.reader(self._lines(), strict=True)

    def _lines(self) -> Iterator[str]:
        for chunk in self.handle:
            self.line_no += 1
            data = chunk
            if self.line_no == 1 and data.startswith(BOM):
                data = data[len(BOM) :]
                self.offset += len(BOM)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ReferenceDataError(
                    f"{self.path}: not valid UTF-8 at byte offset {self.offset + exc.start}"
                    f" (line {self.line_no})"
                ) from None
            self.offset += len(data)
            self.pending.append(text)
            yield text

    def __iter__(self) -> Iterator[tuple[int, list[str] | None, str]]:
        """Yield (line, fields or None when the quoting is broken, raw text)."""
        while True:
            self.pending = []
            start = self.line_no + 1
            try:
                fields = next(self.reader)
            except StopIteration:
                return
            except csv.Error:
                fields = None
            raw = "".join(self.pending)
            if raw.endswith("\r\n"):
                raw = raw[:-2]
            elif raw.endswith("\n"):
                raw = raw[:-1]
            yield start, fields, raw


NUL_SUBSTITUTE = "\ufffd"  # PostgreSQL text cannot hold NUL (docs/decisions.md)


def parse_order_ts(text: str) -> datetime | None:
    """Parse an order timestamp per the decisions; None when it is not one."""
    m = TS_RE.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, frac, offset = m.groups()
    if offset is None:
        tz: Any = JAKARTA
    elif offset == "Z":
        tz = UTC
    else:
        off_h, off_m = int(offset[1:3]), int(offset[4:6])
        if off_m > 59:
            return None
        delta = timedelta(hours=off_h, minutes=off_m)
        try:
            tz = timezone(-delta if offset[0] == "-" else delta)
        except ValueError:
            return None
    try:
        return datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            int((frac or "").ljust(6, "0")),
            tzinfo=tz,
        )
    except ValueError:
        return None


def check_row(values: list[str], day: date) -> str | tuple:
    """Return the first broken rule's reason, or the normalised fact values."""
    # str.strip() and str.split() with no argument use str.isspace: Unicode whitespace
    # (U+00A0, U+3000, U+0085, ...) as well as ASCII (docs/decisions.md)
    order_id, order_ts, customer_id, kota, produk, qty, harga, diskon = (
        v.strip() for v in values
    )
    if not order_id:
        return "missing_order_id"
    ts = parse_order_ts(order_ts)
    if ts is None:
        return "bad_order_ts"
    try:
        local = ts.astimezone(JAKARTA)
    except OverflowError:  # a real date-time whose Jakarta date is outside year 1..9999
        return "wrong_date"
    if local.date() != day:
        return "wrong_date"
    if not kota:
        return "missing_kota"
    if not INT_RE.fullmatch(qty) or not 1 <= int(qty) <= MAX_QTY:
        return "bad_qty"
    n = int(qty)
    if not MONEY_RE.fullmatch(harga):
        return "bad_price"
    price = Decimal(harga)
    bruto = n * price
    if bruto >= MAX_BRUTO:
        return "bad_price"
    if diskon == "":
        disc = Decimal(0)
    elif MONEY_RE.fullmatch(diskon):
        disc = Decimal(diskon)
    else:
        return "bad_discount"
    if disc > bruto:
        return "bad_discount"
    kota_norm = " ".join(kota.split()).title()
    return (order_id, local.isoformat(), customer_id, kota_norm, produk, n, price, disc, bruto)


def money(value: Decimal) -> str:
    """Format money with exactly two decimals."""
    return f"{value:.2f}"


def _connect(warehouse_url: str) -> tuple[str, Any]:
    if "://" not in warehouse_url:
        return "sqlite", sqlite3.connect(warehouse_url, isolation_level=None)
    scheme, rest = warehouse_url.split("://", 1)
    if scheme.split("+")[0] == "sqlite":
        # SQLAlchemy style: sqlite:///relative.db, sqlite:////absolute.db, sqlite:// = memory
        path = rest.split("?", 1)[0]
        path = path[1:] if path.startswith("/") else path
        return "sqlite", sqlite3.connect(path or ":memory:", isolation_level=None)
    if scheme.split("+")[0] in ("postgresql", "postgres"):
        import psycopg

        return "postgresql", psycopg.connect("postgresql://" + rest)
    raise ValueError(f"unsupported warehouse URL: {warehouse_url}")


def _write_csv(path: Path, header: tuple[str, ...], rows: list[list[Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            quote_all = csv.writer(f, lineterminator="\n", quoting=csv.QUOTE_ALL)
            writer.writerow(header)
            for row in rows:
                # a lone CR is not quoted by `csv` with "\n" line ends: quote that row whole
                cr = any(isinstance(v, str) and "\r" in v for v in row)
                (quote_all if cr else writer).writerow(row)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_reference(
    raw_file: Path, day: date, warehouse_url: str, gold_dir: Path, quarantine_dir: Path
) -> dict:
    """Load one raw partition the plain way and write its gold and quarantine files."""
    raw_file = Path(raw_file)
    if not raw_file.is_file() or raw_file.stat().st_size == 0:
        raise ReferenceDataError(f"{raw_file}: not a partition (missing or empty file)")

    counts = dict.fromkeys(REASONS, 0)
    quarantine: list[tuple[int, str, list[str] | None, str]] = []
    winners: dict[str, tuple[int, list[str], tuple]] = {}
    extracted = 0
    duplikat = 0

    with open(raw_file, "rb") as handle, _whole_fields():
        records = iter(_Records(raw_file, handle))
        header: list[str] | None = None
        for _line, fields, _raw in records:
            if fields is None:
                raise ReferenceDataError(f"{raw_file}: header has broken quoting")
            if fields:
                header = [name.strip() for name in fields]  # as extract does
                break
        if header is None:
            raise ReferenceDataError(f"{raw_file}: no header")
        if len(set(header)) != len(header):
            raise ReferenceDataError(f"{raw_file}: duplicated header name in {header}")
        missing = [name for name in REQUIRED if name not in header]
        if missing:
            raise ReferenceDataError(f"{raw_file}: missing required column(s) {missing}")
        extra = [name for name in header if name not in REQUIRED]
        if extra:
            log.info("%s: ignoring extra column(s) %s", raw_file, extra)
        width = len(header)
        index = [header.index(name) for name in REQUIRED]

        for line, fields, raw in records:
            if fields == []:
                continue  # a blank line is not a row
            extracted += 1
            if fields is None or len(fields) != width:
                counts["malformed_row"] += 1
                quarantine.append((line, "malformed_row", None, raw.replace("\x00", NUL_SUBSTITUTE)))
                continue
            values = [fields[i] for i in index]
            if any("\x00" in value for value in values):
                counts["malformed_row"] += 1
                quarantine.append(
                    (line, "malformed_row", [v.replace("\x00", NUL_SUBSTITUTE) for v in values], ""))
                continue
            result = check_row(values, day)
            if isinstance(result, str):
                counts[result] += 1
                quarantine.append((line, result, values, ""))
                continue
            previous = winners.pop(result[0], None)
            if previous is not None:
                duplikat += 1
                quarantine.append((previous[0], "duplicate", previous[1], ""))
            winners[result[0]] = (line, values, result)

    kind, conn = _connect(warehouse_url)
    ph = "?" if kind == "sqlite" else "%s"
    day_text = day.isoformat()
    summary: dict[str, list[Any]] = {}
    try:
        cur = conn.cursor()
        if kind == "sqlite":
            for stmt in DDL[kind]:
                cur.execute(stmt)
            cur.execute("BEGIN IMMEDIATE")
        else:
            for stmt in DDL[kind]:
                cur.execute(stmt)
        cur.execute(f"DELETE FROM {FACT_TABLE} WHERE order_date = {ph}", (day_text,))
        cur.execute(f"DELETE FROM {SUMMARY_TABLE} WHERE order_date = {ph}", (day_text,))
        insert_fact = (
            f"INSERT INTO {FACT_TABLE} (order_id, order_date, order_ts, customer_id, kota,"
            " produk, qty, harga_satuan, diskon, bruto, bersih)"
            f" VALUES ({', '.join([ph] * 11)}) ON CONFLICT (order_id) DO NOTHING"
        )
        for line, values, row in winners.values():
            order_id, ts, customer_id, kota, produk, qty, price, disc, bruto = row
            bersih = bruto - disc
            cur.execute(
                insert_fact,
                (
                    order_id,
                    day_text,
                    ts,
                    customer_id,
                    kota,
                    produk,
                    qty,
                    money(price),
                    money(disc),
                    money(bruto),
                    money(bersih),
                ),
            )
            # rows of this date were deleted above, so a conflict is another date's row
            if cur.rowcount == 0:
                counts["order_id_in_other_partition"] += 1
                quarantine.append((line, "order_id_in_other_partition", values, ""))
                continue
            agg = summary.setdefault(kota, [0, 0, Decimal(0), Decimal(0)])
            agg[0] += 1
            agg[1] += qty
            agg[2] += bruto
            agg[3] += bersih

        gold_rows = [
            [day_text, kota, n, qty, money(bruto), money(bersih)]
            for kota, (n, qty, bruto, bersih) in sorted(summary.items())
        ]
        insert_summary = (
            f"INSERT INTO {SUMMARY_TABLE} (order_date, kota, jumlah_pesanan, total_qty,"
            f" bruto, bersih) VALUES ({', '.join([ph] * 6)})"
        )
        for gold_row in gold_rows:
            cur.execute(insert_summary, gold_row)

        # validation: source rows per kota == fact rows per kota for this date
        cur.execute(
            f"SELECT kota, COUNT(*) FROM {FACT_TABLE} WHERE order_date = {ph} GROUP BY kota",
            (day_text,),
        )
        loaded = {kota: n for kota, n in cur.fetchall()}
        expected = {kota: agg[0] for kota, agg in summary.items()}
        if loaded != expected:
            raise RuntimeError(f"reconcile failed for {day_text}: {loaded} != {expected}")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.close()

    gold = Path(gold_dir) / f"summary_harian_{day_text}.csv"
    _write_csv(gold, GOLD_HEADER, gold_rows)
    quarantine.sort(key=lambda q: q[0])
    _write_csv(
        Path(quarantine_dir) / f"karantina_{day_text}.csv",
        QUARANTINE_HEADER,
        [
            [day_text, line, reason, *(values or [""] * len(REQUIRED)), raw]
            for line, reason, values, raw in quarantine
        ],
    )
    fact = sum(agg[0] for agg in summary.values())
    return {
        "extracted": extracted,
        "karantina": counts,
        "duplikat": duplikat,
        "fact": fact,
        "summary": len(gold_rows),
        "gold": gold,
        "quarantine": Path(quarantine_dir) / f"karantina_{day_text}.csv",
    }
