"""The floor of one benchmark run: what the database and the CPU allow for the same work.

Run by ``python -m bench._child floor SPEC_JSON`` after the pipeline side, on a fresh
warehouse created by the pipeline's own ``Warehouse.ensure_schema()`` (same tables, same
indexes), for the same partition and the same final rows. Each stage's floor is timed on
its own; what is only preparation (reading the pipeline's final rows out of its warehouse,
writing the staged extract the transform floor reads) is not timed.

* extract: ``pyarrow.csv.read_csv`` of the partition once, every column as a string
  (multi-threaded; a row with the wrong number of fields is skipped, not kept);
* transform: DuckDB (the pipeline's memory bound) reading the staged extract and writing
  every row with its fields trimmed and cast to their types to Parquet, in one pass: no rule
  is applied, nothing is de-duplicated or sorted;
* load: the date's final fact, summary and quarantine rows, as the pipeline left them in its
  warehouse, ingested in one transaction: SQLite INSERTs of as many rows as the pipeline's
  (``sqlite_rows_per_insert``: 256; the values already flat lists of Python objects, the
  date's order_date written into each statement, as the pipeline's fact insert does), PostgreSQL
  ``COPY .. FROM STDIN (FORMAT binary)`` (the rows already in COPY's binary format);
* validate: the fact checksum's read-back: the rows of the date in key order, each row's
  canonical line written by the database (SQLite ``json_array``; PostgreSQL the
  concatenation `tokokita_etl.warehouse.checksums` builds, streamed by ``COPY .. TO STDOUT``), hashed
  with SHA-256. No escape handling, no per-kota count, no summary or quarantine check.
"""

from __future__ import annotations

import hashlib
import time
from datetime import date
from pathlib import Path

TABLES = ("fact_pesanan", "summary_harian", "karantina")


def _pg_conninfo(url: str) -> str:
    return "postgresql://" + url.split("://", 1)[1]


def extract_floor(raw_file: Path) -> tuple[float, object]:
    """Seconds to read and parse the CSV once with Arrow, and the table."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with open(raw_file, encoding="utf-8-sig") as handle:
        names = [n.strip() for n in handle.readline().rstrip("\r\n").split(",")]
    start = time.perf_counter()
    table = pacsv.read_csv(
        raw_file,
        read_options=pacsv.ReadOptions(use_threads=True, block_size=8 << 20),
        parse_options=pacsv.ParseOptions(invalid_row_handler=lambda _row: "skip"),
        convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                             strings_can_be_null=False))
    return time.perf_counter() - start, table


def transform_floor(table, work: Path, memory_limit: str) -> float:
    """Seconds for DuckDB to read the staged extract and write the typed rows."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tokokita_etl.orders.contract import REQUIRED_COLUMNS
    from tokokita_etl.orders.transform import duckdb_config, trim_sql

    work.mkdir(parents=True, exist_ok=True)
    staged = work / "extract.parquet"
    columns = [c for c in REQUIRED_COLUMNS if c in table.column_names]
    rows = table.select(columns)
    rows = rows.add_column(0, "line", pa.array(range(2, rows.num_rows + 2), pa.int64()))
    pq.write_table(rows, staged)  # untimed: the pipeline's extract writes its own
    del rows
    casts = {"order_ts": "TIMESTAMPTZ", "qty": "BIGINT", "harga_satuan": "DECIMAL(18, 2)",
             "diskon": "DECIMAL(18, 2)"}
    # trimmed the way the pipeline trims (a trim only where an end is whitespace), the
    # fastest way DuckDB has
    values = ", ".join(
        f"try_cast({trim_sql(c)} AS {casts[c]}) AS {c}" if c in casts
        else f"{trim_sql(c)} AS {c}" for c in columns)
    con = duckdb.connect(config=duckdb_config(work, memory_limit))
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET preserve_insertion_order = false")
        start = time.perf_counter()
        con.execute(f"COPY (SELECT line, {values} FROM read_parquet('{staged}')) "
                    f"TO '{work / 'typed.parquet'}' (FORMAT parquet)")
        return time.perf_counter() - start
    finally:
        con.close()


def _sqlite_rows(source_url: str, day: date) -> dict[str, tuple[list[str], list[tuple]]]:
    """Each table's columns but order_date, and the values of its rows of `day`."""
    import sqlite3

    conn = sqlite3.connect(source_url.removeprefix("sqlite:///"))
    try:
        out = {}
        for t in TABLES:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({t})")
                       if r[1] != "order_date"]
            out[t] = columns, conn.execute(f"SELECT {', '.join(columns)} FROM {t} "
                                           "WHERE order_date = ?", (day.isoformat(),)).fetchall()
        return out
    finally:
        conn.close()


def _pg_rows(source_url: str, day: date) -> dict[str, bytes]:
    import psycopg

    out = {}
    with psycopg.connect(_pg_conninfo(source_url)) as conn, conn.cursor() as cur:
        for t in TABLES:
            buffer = bytearray()
            with cur.copy(f"COPY (SELECT * FROM {t} WHERE order_date = "
                          f"'{day.isoformat()}'::date) TO STDOUT (FORMAT binary)") as copy:
                for chunk in copy:
                    buffer += chunk
            out[t] = bytes(buffer)
    return out


def _multi_row_inserts(conn, table: str, columns: list[str], rows: list[tuple],
                       day: date) -> list[tuple[str, list]]:
    """`rows` of `table`'s `columns` as INSERT statements of as many rows as the pipeline's
    bind on `conn` (`sqlite_rows_per_insert`), each with its values in one flat list and
    order_date `day` written into the statement."""
    from tokokita_etl.warehouse.bulk import sqlite_rows_per_insert

    per_insert = sqlite_rows_per_insert(conn, len(columns))
    row = f"({', '.join(['?'] * len(columns))}, '{day.isoformat()}')"
    head = f"INSERT INTO {table} ({', '.join(columns)}, order_date) VALUES "
    return [(head + ", ".join([row] * len(chunk)),
             [value for values in chunk for value in values])
            for chunk in (rows[i:i + per_insert] for i in range(0, len(rows), per_insert))]


def load_floor(warehouse, source_url: str, day: date) -> tuple[float, dict[str, int]]:
    """Seconds to ingest the final rows of `day` into the fresh warehouse, and the rows."""
    if warehouse.is_sqlite:
        import sqlite3

        from tokokita_etl.warehouse.database import SQLITE_CACHE_KB

        rows = _sqlite_rows(source_url, day)
        conn = sqlite3.connect(warehouse.url.database, isolation_level=None)
        conn.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KB}")  # as the pipeline's
        # the fastest way found to bind rows: multi-row INSERTs, as the pipeline's, their
        # values already flat lists (untimed)
        try:
            statements = {t: _multi_row_inserts(conn, t, *rows[t], day)
                          for t in TABLES if rows[t][1]}
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            for inserts in statements.values():
                for sql, values in inserts:
                    conn.execute(sql, values)
            conn.execute("COMMIT")
            seconds = time.perf_counter() - start
        finally:
            conn.close()
        return seconds, {t: len(rows[t][1]) for t in TABLES}
    import psycopg

    data = _pg_rows(source_url, day)
    with psycopg.connect(_pg_conninfo(warehouse.url.render_as_string(hide_password=False))) \
            as conn, conn.cursor() as cur:
        start = time.perf_counter()
        for t in TABLES:
            with cur.copy(f"COPY {t} FROM STDIN (FORMAT binary)") as copy:
                copy.write(data[t])
        conn.commit()
        seconds = time.perf_counter() - start
        counts = {t: cur.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    return seconds, counts


def validate_floor(warehouse, day: date) -> tuple[float, str]:
    """Seconds to read the fact rows of `day` back in key order as canonical lines and hash
    them, and the digest."""
    from tokokita_etl.orders.schema import fact_pesanan

    digest = hashlib.sha256()
    if warehouse.is_sqlite:
        import sqlite3

        from tokokita_etl.warehouse.database import SQLITE_CACHE_KB

        conn = sqlite3.connect(warehouse.url.database, isolation_level=None)
        conn.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KB}")
        values = ", ".join(c.name for c in fact_pesanan.columns)
        try:
            start = time.perf_counter()
            cursor = conn.execute(
                f"SELECT json_array({values}) FROM fact_pesanan WHERE order_date = ? "
                f"ORDER BY {warehouse.key_order(fact_pesanan)}", (day.isoformat(),))
            while rows := cursor.fetchmany(50_000):
                lines = [r[0] for r in rows]
                lines.append("")
                digest.update("\n".join(lines).encode("utf-8"))
            seconds = time.perf_counter() - start
        finally:
            conn.close()
        return seconds, digest.hexdigest()
    import psycopg

    from tokokita_etl.warehouse.checksums import _pg_rows_sql

    sql = _pg_rows_sql(warehouse, fact_pesanan).replace("%s", f"'{day.isoformat()}'::date")
    with psycopg.connect(_pg_conninfo(warehouse.url.render_as_string(hide_password=False))) \
            as conn, conn.cursor() as cur:
        start = time.perf_counter()
        cur.execute("SELECT set_config('TimeZone', %s, true), "
                    "set_config('DateStyle', 'ISO, YMD', true), "
                    "set_config('enable_sort', 'off', true)", (warehouse.tz.key,))
        with cur.copy(f"COPY ({sql}) TO STDOUT") as copy:
            for chunk in copy:
                digest.update(chunk)
        seconds = time.perf_counter() - start
    return seconds, digest.hexdigest()


def run_floor(spec: dict) -> dict:
    """Every stage's floor for one partition; seconds per stage and what was ingested."""
    from tokokita_etl.orders.contract import partition_path
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.orders.transform import DEFAULT_MEMORY_LIMIT
    from tokokita_etl.settings.model import default
    from tokokita_etl.warehouse.database import Warehouse

    ORDERS.declare_tables()
    day = date.fromisoformat(spec["date"])
    work = Path(spec["work"])
    warehouse = Warehouse(spec["warehouse_url"], default("timezone"))  # as the pipeline's side
    warehouse.ensure_schema()
    warehouse.engine.dispose()
    stages: dict[str, float] = {}
    stages["extract"], table = extract_floor(
        partition_path(Path(spec["raw_dir"]), day))
    parsed_rows = table.num_rows
    stages["transform"] = transform_floor(table, work / "floor", DEFAULT_MEMORY_LIMIT)
    del table
    stages["load"], counts = load_floor(warehouse, spec["source_url"], day)
    stages["validate"], checksum = validate_floor(warehouse, day)
    return {"stages_s": stages, "parsed_rows": parsed_rows, "loaded_rows": counts,
            "fact_checksum": checksum}
