"""Transform: apply the row rules, normalise, de-duplicate (vectorised in DuckDB)."""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from tokokita_etl.files import atomic_path
from tokokita_etl.orders.contract import (
    ALL_REASONS,
    BAD_DISCOUNT,
    BAD_ORDER_TS,
    BAD_PRICE,
    BAD_QTY,
    DUPLICATE,
    EXTRACT_MALFORMED,
    EXTRACT_ROWS,
    MALFORMED,
    MISSING_KOTA,
    MISSING_ORDER_ID,
    REJECTED_ROWS,
    REPEATING_VALID_COLUMNS,
    REQUIRED_COLUMNS,
    ROW_REASONS,
    VALID_ROWS,
    WRONG_DATE,
)
from tokokita_etl.orders.settings import OrdersSettings
from tokokita_etl.settings.model import default

#: what every field is trimmed of, and whose runs inside `kota` collapse to one space: every
#: character Python's `str.isspace` accepts (ASCII whitespace, the information separators
#: U+001C..U+001F, NEL U+0085, no-break spaces U+00A0/U+202F, U+1680, U+2000..U+200A, the
#: line and paragraph separators U+2028/U+2029, U+205F and the ideographic space U+3000)
WS = (" \t\n\v\f\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
      "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_WS_RUN = re.compile(f"[{re.escape(WS)}]+")
# ISO 8601 as decided in docs/decisions.md; calendar validity is checked by the cast
TS_RE = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?"
)
MONEY_RE = r"[0-9]+(\.[0-9]{1,2})?"
NUL_SUBSTITUTE = "\ufffd"
STREAM_ROWS = 122_880  # rows per batch (and Parquet row group) of a streamed result
MAX_BRUTO = 10**16


@dataclass
class TransformResult:
    """What transform produced."""

    rows: int
    valid: int
    karantina: int
    duplikat: int
    reasons: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


def title_kota(text: str) -> str:
    """Trim, collapse whitespace runs (`WS`) to one ASCII space and title-case a city name."""
    return _WS_RUN.sub(" ", text.strip(WS)).title()


def trim_sql(column: str) -> str:
    """SQL for `column` trimmed of `WS`. DuckDB's trim with a set of characters costs about
    0.1 s per million values, so it runs only where the first or last character is in the
    set (a third of transform's time at 1M rows before). The first and last characters are
    taken by index (`c[1]`, `c[-1]`: code points, as `left`/`right`), which costs about half
    of `left`/`right` (7 columns of 1M rows: 0.74 -> 0.43 CPU seconds)."""
    return (f"CASE WHEN contains('{WS}', {column}[1]) OR contains('{WS}', {column}[-1])"
            f" THEN trim({column}, '{WS}') ELSE {column} END")


def repeated_hour_offset(day: date, tz: str) -> int | None:
    """The UTC offset in seconds that `tz` leaves during `day` when its clocks go back (the
    wall times after the change repeat), or None on a day without such a change."""
    if day in (date.min, date.max):  # the day's neighbouring instants are outside Python's
        return None
    zone = ZoneInfo(tz)
    start = datetime.combine(day, time(), zone).astimezone(UTC)
    # the offset every quarter hour of the day's instants (and two hours either side): a
    # zone's changes are months apart, so each one falls between two neighbouring samples
    instants = [start + timedelta(minutes=15 * n) for n in range(-8, 4 * 26 + 9)]
    offsets = [t.astimezone(zone).utcoffset() for t in instants]
    for before, after in itertools.pairwise(offsets):
        if after < before:
            return int(before.total_seconds())
    return None


def wall_time_sql(day: date, tz: str, wall: str) -> str:
    """SQL for the instant of the wall time `wall` (a TIMESTAMP) in `tz`, as Python reads it
    (`fold=0`): a wall time that happens twice, in the hour a change of `day` repeats, is its
    first occurrence. DuckDB's `timezone` takes the second; on such a day the first is
    `wall` less the offset before the change, wherever that instant's wall time is `wall`."""
    later = f"timezone('{tz}', {wall})"
    earlier_offset = repeated_hour_offset(day, tz)
    if earlier_offset is None:
        return later
    first = f"(timezone('UTC', {wall}) - INTERVAL ({earlier_offset}) SECOND)"
    return f"(CASE WHEN timezone('{tz}', {first}) = {wall} THEN {first} ELSE {later} END)"


def _checked_sql(day: date, tz: str, kota_type: str = "VARCHAR",
                 produk_type: str = "VARCHAR") -> str:
    """One row per well-formed record: its line, reason (or NULL) as a `REASON_TYPE`, trimmed
    order_id, and a valid row's parsed values (NULL in a rejected row), its normalised kota
    and its produk as `kota_type` and `produk_type` (`_value_type`). The `kota_map` table
    maps each trimmed kota to its normalised name."""
    trimmed = ",\n".join(f"{trim_sql(c)} AS t_{c}" for c in REQUIRED_COLUMNS)
    # PostgreSQL text cannot hold NUL: such a record is malformed (the quarantine keeps its
    # fields with NUL replaced)
    has_nul = " OR ".join(f"contains({c}, chr(0))" for c in REQUIRED_COLUMNS)
    return f"""
    WITH src AS (
        SELECT t.*, m.kota_norm FROM (
            SELECT line, has_nul, {trimmed}
            FROM (SELECT *, ({has_nul}) AS has_nul FROM read_parquet($rows))
        ) t LEFT JOIN kota_map m USING (t_kota)
    ), parsed AS (
        SELECT *,
            -- year 0000 is not a calendar year (Python's datetime, the reference, rejects it)
            CASE WHEN regexp_full_match(t_order_ts, '{TS_RE}')
                      AND NOT starts_with(t_order_ts, '0000') THEN
                CASE WHEN regexp_matches(t_order_ts, '(Z|[+-][0-9]{{2}}:[0-9]{{2}})$')
                     THEN try_cast(t_order_ts AS TIMESTAMPTZ)
                     ELSE {wall_time_sql(day, tz, "try_cast(t_order_ts AS TIMESTAMP)")}
                END
            END AS ts,
            CASE WHEN regexp_full_match(t_qty, '[0-9]+')
                 THEN try_cast(t_qty AS BIGINT) END AS n_qty,
            CASE WHEN regexp_full_match(t_harga_satuan, '{MONEY_RE}')
                 THEN try_cast(t_harga_satuan AS DECIMAL(18, 2)) END AS n_harga,
            CASE WHEN t_diskon = '' THEN 0::DECIMAL(18, 2)
                 WHEN regexp_full_match(t_diskon, '{MONEY_RE}')
                 THEN try_cast(t_diskon AS DECIMAL(18, 2)) END AS n_diskon
        FROM src
    ), valued AS (
        SELECT *, timezone('{tz}', ts) AS local_ts,
            CAST(round(epoch(timezone('{tz}', ts)) - epoch(ts)) AS INTEGER) AS off_s,
            -- qty as DECIMAL(38, 0): the product keeps scale 2 (DECIMAL(38, 2)); with
            -- DECIMAL(38, 2) it had scale 4, and every use rescaled a 128-bit value
            CAST(n_qty AS DECIMAL(38, 0)) * n_harga AS n_bruto
        FROM parsed
    )
    , reasoned AS (
        SELECT *,
            CASE
                WHEN has_nul THEN '{MALFORMED}'
                WHEN t_order_id = '' THEN '{MISSING_ORDER_ID}'
                WHEN ts IS NULL THEN '{BAD_ORDER_TS}'
                WHEN CAST(local_ts AS DATE) <> DATE '{day.isoformat()}' THEN '{WRONG_DATE}'
                WHEN t_kota = '' THEN '{MISSING_KOTA}'
                WHEN n_qty IS NULL OR n_qty < 1 OR n_qty > 2147483647 THEN '{BAD_QTY}'
                WHEN n_harga IS NULL OR n_bruto >= {MAX_BRUTO} THEN '{BAD_PRICE}'
                WHEN n_diskon IS NULL OR n_diskon > n_bruto THEN '{BAD_DISCOUNT}'
            END::{REASON_TYPE} AS reason
        FROM valued
    )
    -- a valid row keeps its parsed values; a rejected row's raw fields are read again from
    -- the staged extract for the quarantine (the table stays narrow, so a large partition
    -- spills less)
    SELECT line, reason, t_order_id,
        {", ".join(f"CASE WHEN reason IS NULL THEN {expr} END AS {name}"
                   for name, expr in _VALID_VALUES.items())},
        CASE WHEN reason IS NULL THEN CAST(kota_norm AS {kota_type}) END AS kota_norm,
        CASE WHEN reason IS NULL THEN CAST(t_produk AS {produk_type}) END AS v_produk
    FROM reasoned
    """


#: the ENUM of a checked row's reason: a byte where the text took 16, so less of the checked
#: rows spills (5M rows: transform 0.6-0.9 s shorter)
REASON_TYPE = "row_reason"


# what a valid row keeps (the bounds were checked, so the money fits DECIMAL(18, 2))
_VALID_VALUES = {
    "local_ts": "local_ts", "off_s": "off_s", "v_customer_id": "t_customer_id",
    "v_qty": "CAST(n_qty AS INTEGER)", "v_harga": "n_harga", "v_diskon": "n_diskon",
}

#: the most distinct values a column is kept as an ENUM of (`_value_type`): with 1M distinct
#: produk values in 5M rows, making the ENUM and casting to it cost 1.8 s, where the text
#: cost nothing to keep
MAX_ENUM_VALUES = 10_000


#: the `+HH:MM` text of a UTC offset of `off_s` seconds, `+HH:MM:SS` when it has seconds (a
#: zone's local mean time, such as Jakarta's +07:07:12 before 1924), as Python writes it
OFFSET_SQL = """(CASE WHEN off_s >= 0 THEN '+' ELSE '-' END)
        || lpad(CAST(abs(off_s) // 3600 AS VARCHAR), 2, '0') || ':'
        || lpad(CAST((abs(off_s) % 3600) // 60 AS VARCHAR), 2, '0')
        || CASE WHEN abs(off_s) % 60 = 0 THEN ''
                ELSE ':' || lpad(CAST(abs(off_s) % 60 AS VARCHAR), 2, '0') END"""


#: a valid row's bruto, within DECIMAL(18, 2) (the bad_price rule); it and bersih are worked
#: out after the sort, not kept in the checked rows (two fewer columns to hold and to sort)
BRUTO_SQL = "CAST(CAST(v_qty AS DECIMAL(18, 0)) * v_harga AS DECIMAL(18, 2))"

#: what `_fact_values` reads of a valid row
SORTED_VALUES = ("t_order_id", "local_ts", "off_s", "v_customer_id", "kota_norm", "v_produk",
                 "v_qty", "v_harga", "v_diskon", "line")


def _offset_sql(con: duckdb.DuckDBPyConnection) -> str:
    """`OFFSET_SQL`, with the text of each offset the valid rows have written by DuckDB once
    (a zone has a few): the per-row formatting cost as much as the rest of the timestamp."""
    pairs = con.execute(f"SELECT off_s, {OFFSET_SQL} FROM "
                        "(SELECT DISTINCT off_s FROM checked WHERE reason IS NULL)").fetchall()
    if not pairs:
        return OFFSET_SQL
    known = " ".join(f"WHEN {int(off)} THEN '{text}'" for off, text in pairs)
    return f"CASE off_s {known} ELSE {OFFSET_SQL} END"


def _fact_values(day: date, offset: str = OFFSET_SQL) -> str:
    """The canonical text of a valid row's fact columns, in FACT_COLUMNS order (and its line);
    `offset`: the SQL of the UTC offset's text (`OFFSET_SQL`). A valid row's local date is D
    (the wrong_date rule), so order_date is D and order_ts is D followed by the local time:
    a whole second as the TIME's own text, a fraction through strftime's six digits (at 5M
    rows, 1.17 -> 0.57 CPU seconds against strftime of the whole timestamp). bersih is cast
    back to DECIMAL(18, 2), where it fits (0 <= bersih <= bruto): the difference of two
    DECIMAL(18, 2) values is a 128-bit DECIMAL(19, 2), whose text cost three times as much
    (5M rows: 1.43 -> 0.51 CPU seconds)."""
    return f"""t_order_id AS order_id, '{day.isoformat()}' AS order_date,
        '{day.isoformat()}T'
            || CASE WHEN microsecond(local_ts) % 1000000 = 0
                    THEN CAST(CAST(local_ts AS TIME) AS VARCHAR)
                    ELSE strftime(local_ts, '%H:%M:%S.%f') END
            || {offset} AS order_ts,
        v_customer_id AS customer_id, CAST(kota_norm AS VARCHAR) AS kota,
        CAST(v_produk AS VARCHAR) AS produk, v_qty AS qty,
        CAST(v_harga AS VARCHAR) AS harga_satuan, CAST(v_diskon AS VARCHAR) AS diskon,
        CAST({BRUTO_SQL} AS VARCHAR) AS bruto,
        CAST(CAST({BRUTO_SQL} - v_diskon AS DECIMAL(18, 2)) AS VARCHAR) AS bersih, line"""


def _value_type(con: duckdb.DuckDBPyConnection, name: str, values_sql: str,
                params: dict | None = None) -> str:
    """The type a valid row keeps a column of `values_sql`'s values as: the ENUM `name` of
    their distinct values when there are at most `MAX_ENUM_VALUES`, else VARCHAR. An ENUM
    value takes a byte or two where text takes 16 and more: kota and produk as ENUMs made the
    checked rows of 5M rows about 200 MB smaller, so less of them and of the valid rows' sort
    spilled (transform 7.1-8.0 s -> 5.7-6.4 s)."""
    con.execute(f"CREATE TEMP TABLE {name}_values AS SELECT DISTINCT * FROM ({values_sql})",
                params)
    if con.execute(f"SELECT count(*) FROM {name}_values").fetchone()[0] > MAX_ENUM_VALUES:
        return "VARCHAR"
    con.execute(f"CREATE TYPE {name} AS ENUM (SELECT * FROM {name}_values)")
    return name


def duckdb_config(staging: Path, memory_limit: str) -> dict[str, str]:
    """DuckDB settings for a stage: at most `memory_limit` (the `duckdb_memory_limit`
    setting), spilling to the staging folder beyond it."""
    return {"memory_limit": memory_limit, "temp_directory": str(staging / "duckdb.tmp")}


#: DuckDB's memory in transform unless the `duckdb_memory_limit` setting says otherwise
DEFAULT_MEMORY_LIMIT = default("duckdb_memory_limit", OrdersSettings)


def transform(day: date, staging: Path, *, tz: str,
              memory_limit: str = DEFAULT_MEMORY_LIMIT) -> TransformResult:
    """Read `extract.parquet`; write `valid.parquet` (de-duplicated) and `rejected.parquet`."""
    con = duckdb.connect(config=duckdb_config(staging, memory_limit))
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET preserve_insertion_order = false")
        rows_file = str(staging / EXTRACT_ROWS)
        # kota has few distinct values: each trimmed one is title-cased in Python, exactly
        # as documented, and the map is joined in the checked pass
        kotas = [r[0] for r in con.execute(
            f"SELECT DISTINCT {trim_sql('kota')} FROM read_parquet($rows)",
            {"rows": rows_file}).fetchall()]
        con.execute("CREATE TEMP TABLE kota_map AS SELECT unnest($kotas::VARCHAR[]) AS t_kota, "
                    "unnest($names::VARCHAR[]) AS kota_norm",
                    {"kotas": kotas, "names": [title_kota(k) for k in kotas]})
        kota_type = _value_type(con, "kota_name", "SELECT kota_norm FROM kota_map")
        con.execute(f"CREATE TYPE {REASON_TYPE} AS ENUM "
                    f"({', '.join(repr(r) for r in (MALFORMED, *ROW_REASONS))})")
        produk_type = _value_type(
            con, "produk_value", f"SELECT {trim_sql('produk')} FROM read_parquet($rows)",
            {"rows": rows_file})
        con.execute(
            f"CREATE TEMP TABLE checked AS {_checked_sql(day, tz, kota_type, produk_type)}",
            {"rows": rows_file})
        # the last valid record of each order_id wins: the losers are the other valid records
        # of the order_ids that occur more than once, a small table that the valid rows and
        # the quarantine are filtered by (a table of every winner's line, joined to the
        # checked rows, cost 1.4 s more at 5M rows; a window over the whole rows cost about as
        # much as all the checks together). The order_ids that may repeat are found by their
        # 64-bit hash, a fixed-width key (grouping the text of 4.8M order_ids took 0.9-1.3 s,
        # their hashes 0.4 s); the few rows with such a hash are then grouped by order_id
        # itself, so a hash collision only adds a row that turns out to be its id's last
        con.execute("""
            CREATE TEMP TABLE losers AS
            WITH maybe_repeated AS (
                SELECT line, t_order_id FROM checked
                WHERE reason IS NULL AND hash(t_order_id) IN (
                    SELECT hash(t_order_id) AS h FROM checked WHERE reason IS NULL
                    GROUP BY h HAVING count(*) > 1)
            )
            SELECT r.line FROM maybe_repeated r JOIN (
                SELECT t_order_id, max(line) AS keep FROM maybe_repeated GROUP BY t_order_id
            ) d USING (t_order_id)
            WHERE r.line <> d.keep
        """)
        offset = _offset_sql(con)
        # the rows are sorted with their typed values and get their text after the sort, in
        # the sorted order (a projection keeps it while insertion order is preserved): the
        # text rows were the wider payload to sort (1M rows: 0.68-0.85 s -> 0.56-0.62 s)
        con.execute("SET preserve_insertion_order = true")
        valid = con.sql(f"""
            SELECT {_fact_values(day, offset)} FROM (
                SELECT {", ".join(SORTED_VALUES)}
                FROM checked
                WHERE reason IS NULL AND line NOT IN (SELECT line FROM losers)
                -- in key order the warehouse's indexes grow at their ends (a PostgreSQL load
                -- of the same 1M rows unsorted took about 1 s longer)
                ORDER BY t_order_id
            )
        """).to_arrow_reader(STREAM_ROWS)
        # DuckDB writes a sorted result to Parquet on one thread; Arrow writes the streamed
        # batches while DuckDB goes on sorting (1M rows: 1.2 s -> 0.9 s)
        with atomic_path(staging / VALID_ROWS) as out, pa.OSFile(str(out), "wb") as sink, \
                pq.ParquetWriter(sink, valid.schema, write_statistics=False,
                                 use_dictionary=list(REPEATING_VALID_COLUMNS)) as writer:
            for batch in valid:
                writer.write_batch(batch)
        con.execute("SET preserve_insertion_order = false")
        # a record holding NUL is malformed: its fields are kept with NUL replaced (a no-op
        # in every other record; only the rejected rows' fields pass through here)
        raw = ", ".join(f"replace({c}, chr(0), '{NUL_SUBSTITUTE}') AS {c}"
                        for c in REQUIRED_COLUMNS)
        with atomic_path(staging / REJECTED_ROWS) as out:
            con.execute(f"""
                COPY (
                    SELECT '{day.isoformat()}' AS order_date, line, reason, {raw}, '' AS raw
                    FROM read_parquet($rows) JOIN (
                        SELECT line, CAST(reason AS VARCHAR) AS reason FROM checked
                        WHERE reason IS NOT NULL
                        UNION ALL
                        SELECT line, '{DUPLICATE}' FROM losers
                    ) USING (line)
                    UNION ALL
                    SELECT '{day.isoformat()}', line, '{MALFORMED}',
                        {", ".join("''" for _ in REQUIRED_COLUMNS)},
                        replace(raw, chr(0), '{NUL_SUBSTITUTE}')
                    FROM read_parquet($malformed)
                    ORDER BY line
                ) TO '{_sql_path(out)}' (FORMAT parquet)
            """, {"malformed": str(staging / EXTRACT_MALFORMED), "rows": rows_file})
        counts = dict(con.execute(
            f"SELECT reason, count(*) FROM read_parquet('{_sql_path(staging / REJECTED_ROWS)}') "
            "GROUP BY reason").fetchall())
        # a record holding NUL is a checked row and a malformed one: rows are counted where
        # they are, not from the reasons
        checked, checked_valid = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE reason IS NULL) FROM checked").fetchone()
        losers = con.execute("SELECT count(*) FROM losers").fetchone()[0]
        unreadable = con.execute("SELECT count(*) FROM read_parquet($malformed)",
                                 {"malformed": str(staging / EXTRACT_MALFORMED)}).fetchone()[0]
    except duckdb.IOException as exc:
        raise os_error(exc) from exc
    finally:
        con.close()
    reasons = {r: int(counts.get(r, 0)) for r in ALL_REASONS if counts.get(r)}
    return TransformResult(
        rows=int(checked) + int(unreadable), valid=int(checked_valid) - int(losers),
        karantina=sum(n for r, n in reasons.items() if r != DUPLICATE),
        duplikat=reasons.get(DUPLICATE, 0), reasons=reasons,
    )


#: DuckDB reports the OS error of a failed write inside its message, as JSON fields:
#: `{"exception_type":"IO","exception_message":"Could not write file \"...\": ...","errno":"28"}`
_DUCKDB_ERRNO = re.compile(r'"errno":"(\d+)"')
_DUCKDB_MESSAGE = re.compile(r'"exception_message":"((?:[^"\\]|\\.)*)"')


def os_error(exc: duckdb.IOException) -> Exception:
    """A DuckDB I/O error that carries an OS error number as that OSError (a full staging
    folder is then the transient ENOSPC it is; DuckDB's message names the file), else itself."""
    code = _DUCKDB_ERRNO.search(str(exc))
    if code is None:
        return exc
    message = _DUCKDB_MESSAGE.search(str(exc))
    return OSError(int(code.group(1)),
                   message.group(1).replace('\\"', '"') if message else str(exc))


def _sql_path(path: Path | str) -> str:
    return str(path).replace("'", "''")
