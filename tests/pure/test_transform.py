"""Row rules, quarantine reasons, duplicates and normalisation: real files through extract + transform.

Every test writes a real raw partition into tmp_path, runs the real extract and transform stages
(csv reader + DuckDB) and reads the staged Parquet outputs back.
"""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import HEADER, csv_text
from tokokita_etl.errors import DataError, MissingPartitionError
from tokokita_etl.orders.contract import REJECTED_ROWS, VALID_ROWS
from tokokita_etl.orders.extract import extract
from tokokita_etl.orders.transform import title_kota, transform

DAY = date(2026, 11, 10)
GOOD = ["TK-1", "2026-11-10 10:00:00", "CUST-1", "Bandung", "Kaos", "2", "50000.00", "1000"]
FIELDS = {name: i for i, name in enumerate(HEADER.split(","))}


@dataclass
class Outcome:
    extracted: int
    valid: dict[str, dict]
    rejected: list[dict]
    result: object

    def reasons(self) -> dict[int, str]:
        return {r["line"]: r["reason"] for r in self.rejected}


def process(tmp_path: Path, text: str | bytes, day: date = DAY, *,
            tz: str = "Asia/Jakarta") -> Outcome:
    raw = tmp_path / "raw"
    raw.mkdir(exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    (raw / f"pesanan_{day.isoformat()}.csv").write_bytes(data)
    staging = tmp_path / "staging"
    ext = extract(raw, day, staging)
    result = transform(day, staging, tz=tz)
    valid = {r["order_id"]: r for r in pq.read_table(staging / VALID_ROWS).to_pylist()}
    rejected = pq.read_table(staging / REJECTED_ROWS).to_pylist()
    assert ext.rows == result.rows
    return Outcome(ext.rows, valid, rejected, result)


def row(**changes: str) -> list[str]:
    values = list(GOOD)
    for name, value in changes.items():
        values[FIELDS[name]] = value
    return values


def one_row_reason(tmp_path: Path, **changes: str) -> str | None:
    out = process(tmp_path, csv_text([row(**changes)]))
    assert out.extracted == 1
    if out.valid:
        assert not out.rejected
        return None
    assert len(out.rejected) == 1
    return out.rejected[0]["reason"]


# -- each rule reason -------------------------------------------------------------------------

REASON_CASES = [
    ("missing_order_id", {"order_id": ""}),
    ("missing_order_id", {"order_id": "   "}),
    ("missing_order_id", {"order_id": "\t \t"}),
    ("bad_order_ts", {"order_ts": "10/11/2026 10:00"}),
    ("bad_order_ts", {"order_ts": "2026-11-31 12:00:00"}),  # impossible date
    ("bad_order_ts", {"order_ts": "2026-02-29 10:00:00"}),  # 2026 is not a leap year
    ("bad_order_ts", {"order_ts": "2026-11-10"}),  # date only
    ("bad_order_ts", {"order_ts": "2026-11-10 10:00"}),  # no seconds
    ("bad_order_ts", {"order_ts": "2026-11-10 24:00:00"}),
    ("bad_order_ts", {"order_ts": "2026-11-10 10:00:60"}),
    ("bad_order_ts", {"order_ts": "2026-11-10 10:00:00.1234567"}),  # 7 fraction digits
    ("bad_order_ts", {"order_ts": "2026-11-10T10:00:00+0700"}),  # offset without colon
    ("bad_order_ts", {"order_ts": "2026-11-10t10:00:00"}),
    ("bad_order_ts", {"order_ts": ""}),
    ("wrong_date", {"order_ts": "2026-11-09 23:59:59"}),
    ("wrong_date", {"order_ts": "2026-11-11 00:00:00"}),
    ("wrong_date", {"order_ts": "2026-11-10T17:00:00Z"}),  # = 11-11 00:00 Jakarta
    ("wrong_date", {"order_ts": "2026-11-10 00:30:00+08:00"}),  # = 11-09 23:30 Jakarta
    ("missing_kota", {"kota": ""}),
    ("missing_kota", {"kota": "   "}),
    ("missing_kota", {"kota": "\t"}),
    ("bad_qty", {"qty": "0"}),
    ("bad_qty", {"qty": "-1"}),
    ("bad_qty", {"qty": "2.5"}),
    ("bad_qty", {"qty": "1.0"}),
    ("bad_qty", {"qty": "abc"}),
    ("bad_qty", {"qty": ""}),
    ("bad_qty", {"qty": "+1"}),
    ("bad_qty", {"qty": "1e3"}),
    ("bad_qty", {"qty": "2147483648"}),
    ("bad_price", {"harga_satuan": "-15000"}),
    ("bad_price", {"harga_satuan": "12500.505"}),  # 3 decimals: never rounded silently
    ("bad_price", {"harga_satuan": "Rp10.000"}),
    ("bad_price", {"harga_satuan": "38,000"}),
    ("bad_price", {"harga_satuan": ""}),
    ("bad_price", {"harga_satuan": ".5"}),
    ("bad_price", {"harga_satuan": "5."}),
    ("bad_price", {"harga_satuan": "1e5"}),
    ("bad_price", {"qty": "2", "harga_satuan": "5000000000000000"}),  # bruto 10^16
    ("bad_discount", {"diskon": "-5000"}),
    ("bad_discount", {"diskon": "10%"}),
    ("bad_discount", {"diskon": "1.005"}),
    ("bad_discount", {"diskon": "abc"}),
    ("bad_discount", {"diskon": "100000.01"}),  # > bruto 2 * 50000.00
]


@pytest.mark.parametrize(("reason", "changes"), REASON_CASES,
                         ids=[f"{r}-{next(iter(c.values()))!r}" for r, c in REASON_CASES])
def test_a_row_breaking_one_rule_is_quarantined_with_that_reason(tmp_path, reason, changes):
    assert one_row_reason(tmp_path, **changes) == reason


@pytest.mark.parametrize("changes", [
    {"diskon": "100000.00"},  # diskon == bruto is allowed
    {"diskon": ""},
    {"diskon": "   "},
    {"harga_satuan": "0", "diskon": ""},  # free gift
    {"qty": "2147483647", "harga_satuan": "1"},
    {"qty": "1", "harga_satuan": "9999999999999999.99"},  # largest bruto that fits NUMERIC(18,2)
    {"order_ts": "2026-11-10T00:00:00+07:00"},
    {"order_ts": "2026-11-09T17:00:00Z"},  # = 11-10 00:00 Jakarta
    {"order_ts": "2026-11-10 23:59:59.999999"},
])
def test_boundary_values_that_are_still_valid_reach_the_fact_rows(tmp_path, changes):
    assert one_row_reason(tmp_path, **changes) is None


@pytest.mark.parametrize(("changes", "reason"), [
    ({"order_id": "", "order_ts": "nope", "qty": "0"}, "missing_order_id"),
    ({"order_ts": "nope", "kota": ""}, "bad_order_ts"),
    ({"order_ts": "2026-11-11 08:00:00", "kota": "", "qty": "0"}, "wrong_date"),
    ({"kota": " ", "qty": "0", "harga_satuan": "x"}, "missing_kota"),
    ({"qty": "abc", "harga_satuan": "Rp38.000"}, "bad_qty"),
    ({"harga_satuan": "-1", "diskon": "10%"}, "bad_price"),
])
def test_the_first_broken_rule_in_the_documented_order_is_the_reason(tmp_path, changes, reason):
    assert one_row_reason(tmp_path, **changes) == reason


def test_quarantined_rule_rows_keep_their_raw_untrimmed_fields_and_line(tmp_path):
    text = csv_text([GOOD, ["  TK-2 ", " 2026-11-10 10:00:00", "CUST-2", " ", " Kaos ", " 1", "5", ""]])
    out = process(tmp_path, text)
    [rejected] = out.rejected
    assert rejected["line"] == 3
    assert rejected["reason"] == "missing_kota"
    assert rejected["order_id"] == "  TK-2 "
    assert rejected["kota"] == " "
    assert rejected["produk"] == " Kaos "
    assert rejected["raw"] == ""


# -- malformed rows ---------------------------------------------------------------------------

def test_malformed_rows_of_every_kind_are_quarantined_with_their_raw_text(tmp_path):
    lines = [
        HEADER,
        ",".join(GOOD),  # 2 ok
        ",".join([*row(order_id="TK-9"), "extra"]),  # 3: 9 fields
        ",".join(row(order_id="TK-7")[:-1]),  # 4: 7 fields
        'TK-Q,2026-11-10 10:00:00,CUST-1,"Bandung"x,Kaos,1,5,0',  # 5: broken quoting
        "",  # 6: blank line, not a row
        ",".join(row(order_id="TK-3")),  # 7 ok
        'TK-U,2026-11-10 11:00:00,CUST-1,Medan,"Kemeja Flanel,,1,120000,0',  # 8: unterminated
    ]
    out = process(tmp_path, "\r\n".join(lines) + "\r\n")
    assert out.extracted == 6
    assert sorted(out.valid) == ["TK-1", "TK-3"]
    malformed = [r for r in out.rejected if r["reason"] == "malformed_row"]
    assert [r["line"] for r in malformed] == [3, 4, 5, 8]
    assert [r["raw"] for r in malformed] == [lines[2], lines[3], lines[4], lines[7]]
    for r in malformed:  # field columns stay empty, the raw text has no line end
        assert all(r[c] == "" for c in FIELDS)
        assert not r["raw"].endswith(("\r", "\n"))
    assert out.result.reasons == {"malformed_row": 4}
    assert out.result.karantina == 4


def test_a_quoted_multiline_field_keeps_physical_line_numbers_of_later_rows(tmp_path):
    text = (HEADER + "\n"
            + 'TK-1,2026-11-10 10:00:00,CUST-1,Bandung,"Kaos\ndua baris",1,5,0\n'
            + "TK-2,2026-11-10 10:00:00,CUST-1,,Kaos,1,5,0\n")
    out = process(tmp_path, text)
    assert out.valid["TK-1"]["produk"] == "Kaos\ndua baris"
    assert out.valid["TK-1"]["line"] == 2
    assert out.reasons() == {4: "missing_kota"}


def test_blank_lines_are_not_rows_and_line_numbers_stay_physical(tmp_path):
    text = HEADER + "\n\n" + ",".join(GOOD) + "\n\n\n" + ",".join(row(order_id="TK-2", kota="")) + "\n"
    out = process(tmp_path, text)
    assert out.extracted == 2
    assert out.valid["TK-1"]["line"] == 3
    assert out.reasons() == {6: "missing_kota"}


# -- duplicates -------------------------------------------------------------------------------

def test_duplicates_the_last_valid_row_in_file_order_wins_the_others_are_kept(tmp_path):
    text = csv_text([
        row(order_id="TK-D", kota="Bandung", qty="1"),  # 2 dup
        row(order_id="TK-D", kota="Medan", qty="2"),  # 3 dup
        row(order_id="TK-D", qty="0"),  # 4 invalid: never a duplicate
        row(order_id="TK-D", kota="jakarta selatan", qty="3"),  # 5 winner
        row(order_id="TK-E", qty="0"),  # 6 invalid
        row(order_id="TK-E"),  # 7 loaded although the same id was invalid above
    ])
    out = process(tmp_path, text)
    assert sorted(out.valid) == ["TK-D", "TK-E"]
    assert out.valid["TK-D"]["kota"] == "Jakarta Selatan"
    assert out.valid["TK-D"]["qty"] == 3
    assert out.valid["TK-D"]["line"] == 5
    assert out.reasons() == {2: "duplicate", 3: "duplicate", 4: "bad_qty", 6: "bad_qty"}
    assert out.result.duplikat == 2
    assert out.result.karantina == 2
    dup = next(r for r in out.rejected if r["line"] == 2)
    assert dup["kota"] == "Bandung"
    assert dup["qty"] == "1"


def test_a_record_holding_nul_is_counted_once_as_malformed_and_never_as_valid(tmp_path):
    """Regression: a record holding NUL (malformed in transform, not in extract) was counted
    as valid in `TransformResult.valid` once valid was derived from the reason counts, and
    twice in `TransformResult.rows` (as a checked row and as a malformed one)."""
    out = process(tmp_path, csv_text([row(produk="Te\x00h"), row(order_id="TK-2")]))
    assert out.extracted == 2 and out.result.rows == 2
    assert sorted(out.valid) == ["TK-2"]
    assert out.result.valid == 1
    assert out.reasons() == {2: "malformed_row"}
    assert out.result.karantina == 1


# -- normalisation ----------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "expected"), [
    (" jakarta  selatan", "Jakarta Selatan"),
    ("MEDAN", "Medan"),
    ("  surabaya ", "Surabaya"),
    ("kota\t \tbaru", "Kota Baru"),
    ("bandung barat", "Bandung Barat"),
])
def test_kota_is_trimmed_whitespace_collapsed_and_title_cased(tmp_path, raw, expected):
    out = process(tmp_path, csv_text([row(kota=raw)]))
    assert out.valid["TK-1"]["kota"] == expected
    assert title_kota(raw.strip()) == expected


def test_every_field_is_trimmed_of_ascii_whitespace(tmp_path):
    values = ["  TK-1 ", "\t2026-11-10T09:05:44 ", " CUST-13022 ", " Bandung ", " Kaos Polos Hitam ",
              " 3 ", " 59000.50 ", " 10000 "]
    out = process(tmp_path, csv_text([values]))
    valid = out.valid["TK-1"]
    assert valid["customer_id"] == "CUST-13022"
    assert valid["produk"] == "Kaos Polos Hitam"
    assert (valid["qty"], valid["harga_satuan"], valid["diskon"]) == (3, "59000.50", "10000.00")
    assert (valid["bruto"], valid["bersih"]) == ("177001.50", "167001.50")


@pytest.mark.parametrize(("raw", "expected"), [
    ("2026-11-10 10:00:00", "2026-11-10T10:00:00+07:00"),
    ("2026-11-10T14:05:07", "2026-11-10T14:05:07+07:00"),
    ("2026-11-10 00:00:00", "2026-11-10T00:00:00+07:00"),
    ("2026-11-09T17:00:00Z", "2026-11-10T00:00:00+07:00"),
    ("2026-11-10T03:05:07Z", "2026-11-10T10:05:07+07:00"),
    ("2026-11-10T05:30:15+02:00", "2026-11-10T10:30:15+07:00"),
    ("2026-11-09T20:15:09-05:00", "2026-11-10T08:15:09+07:00"),
    ("2026-11-10T12:00:01+07:00", "2026-11-10T12:00:01+07:00"),
    ("2026-11-10 10:22:10.250", "2026-11-10T10:22:10.250000+07:00"),
    ("2026-11-10 10:22:10.000", "2026-11-10T10:22:10+07:00"),
    ("2026-11-10 23:59:59.999999", "2026-11-10T23:59:59.999999+07:00"),
    ("2026-11-10T00:00:00.000001Z", "2026-11-10T07:00:00.000001+07:00"),
    ("2026-11-10 10:00:09.5+05:30", "2026-11-10T11:30:09.500000+07:00"),
])
def test_order_ts_is_normalised_to_jakarta_iso_with_microseconds_only_when_nonzero(
        tmp_path, raw, expected):
    """Regression for the DuckDB `microsecond()` bug: it returns sub-minute microseconds
    (seconds * 10^6 + µs), so every timestamp with non-zero seconds got a wrong fraction
    (`07:12:05` became `07:12:05.500000`)."""
    out = process(tmp_path, csv_text([row(order_ts=raw)]))
    assert out.valid["TK-1"]["order_ts"] == expected
    assert out.valid["TK-1"]["order_date"] == "2026-11-10"


def test_an_offset_with_seconds_is_written_to_the_second_as_isoformat_does(tmp_path):
    """Regression: Jakarta's offset before 1924, local mean time +07:07:12, was written
    +07:07, text that names an instant 12 seconds away."""
    day = date(1920, 6, 1)
    out = process(tmp_path, csv_text([row(order_id="TK-1", order_ts="1920-06-01 10:00:00"),
                                      row(order_id="TK-2", order_ts="1920-06-01T03:00:00Z")]),
                  day)
    jakarta = ZoneInfo("Asia/Jakarta")
    assert [out.valid[k]["order_ts"] for k in ("TK-1", "TK-2")] == [
        datetime(1920, 6, 1, 10, tzinfo=jakarta).isoformat(),
        datetime(1920, 6, 1, 3, tzinfo=UTC).astimezone(jakarta).isoformat()]
    assert out.valid["TK-2"]["order_ts"] == "1920-06-01T10:07:12+07:07:12"


@pytest.mark.parametrize(("tz", "day", "wall_times"), [
    ("America/New_York", date(2026, 11, 1),
     ["00:59:59", "01:00:00", "01:30:00", "01:59:59.5", "02:00:00", "23:00:00"]),
    ("Australia/Lord_Howe", date(2026, 4, 5), ["01:29:00", "01:30:00", "01:45:00", "02:00:00"]),
    ("America/New_York", date(2026, 3, 8), ["01:59:59", "02:30:00", "03:00:00"]),
])
def test_a_wall_time_is_read_as_python_reads_it_on_the_days_clocks_change(
        tmp_path, tz, day, wall_times):
    """Regression: a wall time that happens twice, in the hour repeated when the clocks go
    back, was read as its second occurrence; Python (fold=0) reads its first."""
    zone = ZoneInfo(tz)
    raws = [f"{day.isoformat()} {wall}" for wall in wall_times]
    rows = [row(order_id=f"TK-{n}", order_ts=raw) for n, raw in enumerate(raws)]
    rows.append(row(order_id="TK-Z", order_ts=f"{day.isoformat()}T06:30:00Z"))
    out = process(tmp_path, csv_text(rows), day, tz=tz)
    valid = {order_id: r["order_ts"] for order_id, r in out.valid.items()}
    expected = {f"TK-{n}": datetime.fromisoformat(raw).replace(tzinfo=zone).astimezone(UTC)
                .astimezone(zone).isoformat() for n, raw in enumerate(raws)}
    expected["TK-Z"] = datetime(day.year, day.month, day.day, 6, 30, tzinfo=UTC).astimezone(
        zone).isoformat()
    assert valid == expected


@pytest.mark.parametrize("day", [date(1, 1, 1), date(9999, 12, 31)])
def test_the_first_and_last_dates_of_the_calendar_are_transformed(tmp_path, day):
    """The search for a day's repeated hour looks at instants around the day, which do not
    exist around these two."""
    out = process(tmp_path, csv_text([row(order_ts=f"{day.isoformat()} 10:00:00")]), day)
    expected = datetime.combine(day, datetime.min.time().replace(hour=10),
                                ZoneInfo("Asia/Jakarta")).isoformat()
    assert out.valid["TK-1"]["order_ts"] == expected


@pytest.mark.parametrize(("qty", "harga", "diskon", "expected"), [
    ("02", "89500.5", "", (2, "89500.50", "0.00", "179001.00", "179001.00")),
    ("1", "0", "0", (1, "0.00", "0.00", "0.00", "0.00")),
    ("3", "0.10", "0.30", (3, "0.10", "0.30", "0.30", "0.00")),
    ("7", "12345.67", "0.01", (7, "12345.67", "0.01", "86419.69", "86419.68")),
    # the largest bruto the bad_price rule lets through, and its bersih: both fill DECIMAL(18, 2)
    ("1", "9999999999999999.99", "0.01",
     (1, "9999999999999999.99", "0.01", "9999999999999999.99", "9999999999999999.98")),
    ("1", "9999999999999999.99", "9999999999999999.99",
     (1, "9999999999999999.99", "9999999999999999.99", "9999999999999999.99", "0.00")),
])
def test_money_is_exact_decimal_with_two_places(tmp_path, qty, harga, diskon, expected):
    out = process(tmp_path, csv_text([row(qty=qty, harga_satuan=harga, diskon=diskon)]))
    v = out.valid["TK-1"]
    assert (v["qty"], v["harga_satuan"], v["diskon"], v["bruto"], v["bersih"]) == expected


def test_qty_and_money_with_many_leading_zeros_are_valid_numbers(tmp_path):
    """Regression: qty was limited to 10 digits and money to 16 integer digits by the regular
    expressions, so `00000000002` or a zero-padded price was `bad_qty`/`bad_price` although
    docs/decisions.md allows any `[0-9]+` within range."""
    out = process(tmp_path, csv_text([row(qty="00000000002", harga_satuan="000000000000000050000.00",
                                          diskon="00000000000000000001000")]))
    v = out.valid["TK-1"]
    assert (v["qty"], v["harga_satuan"], v["diskon"], v["bruto"]) == (2, "50000.00", "1000.00",
                                                                       "100000.00")


def test_huge_numbers_are_rejected_not_crashing_the_partition(tmp_path):
    text = csv_text([
        row(order_id="TK-1", qty="99999999999999999999999"),
        row(order_id="TK-2", harga_satuan="12345678901234567890"),
        row(order_id="TK-3", diskon="12345678901234567890"),
        row(order_id="TK-4"),
    ])
    out = process(tmp_path, text)
    assert out.reasons() == {2: "bad_qty", 3: "bad_price", 4: "bad_discount"}
    assert list(out.valid) == ["TK-4"]


def test_kota_of_only_non_ascii_spaces_never_reaches_the_fact_rows_as_an_empty_kota(tmp_path):
    """Regression: kota `\\u00a0` (a no-break space) passed missing_kota (only ASCII whitespace
    is trimmed) but `str.split()` then collapsed it to an empty kota in the fact rows."""
    out = process(tmp_path, csv_text([row(kota="\u00a0")]))
    for v in out.valid.values():
        assert v["kota"] != ""


# -- file level -------------------------------------------------------------------------------

def test_bom_crlf_reordered_and_extra_columns_are_accepted(tmp_path):
    header = "kota, diskon ,catatan,order_id,qty,harga_satuan,produk,order_ts,customer_id"
    body = "Medan,500,ini diabaikan,TK-1,2,1000,Teh,2026-11-10 10:00:00,CUST-1"
    out = process(tmp_path, "\ufeff" + header + "\r\n" + body + "\r\n")
    v = out.valid["TK-1"]
    assert (v["kota"], v["qty"], v["bruto"], v["bersih"], v["customer_id"]) == (
        "Medan", 2, "2000.00", "1500.00", "CUST-1")


@pytest.mark.parametrize(("content", "fragment"), [
    (HEADER.replace("diskon", "discount") + "\n" + ",".join(GOOD) + "\n", "diskon"),
    (HEADER.replace(",qty,", ",jumlah,") + "\n", "qty"),
    (HEADER + ",order_id\n", "order_id"),
    (HEADER + ",catatan,catatan\n", "catatan"),
    ("\n\n  \n", "header"),
    ("\n\n\n", "header"),
])
def test_a_bad_header_fails_the_partition_naming_the_file_and_problem(tmp_path, content, fragment):
    """Includes the regression that a duplicated *extra* column name was accepted although
    docs/decisions.md says any duplicated header name fails the partition."""
    with pytest.raises(DataError) as err:
        process(tmp_path, content)
    assert "pesanan_2026-11-10.csv" in str(err.value)
    assert fragment in str(err.value)


def test_a_header_with_broken_quoting_fails_naming_the_file(tmp_path):
    """Regression: a csv.Error in the header escaped as a bare `Error('unexpected end of data')`
    without the file name instead of a DataError naming the file."""
    with pytest.raises(DataError) as err:
        process(tmp_path, 'order_id,"order_ts,customer_id,kota,produk,qty,harga_satuan,diskon\n')
    assert "pesanan_2026-11-10.csv" in str(err.value)


def test_undecodable_bytes_fail_the_partition_naming_the_file_and_line(tmp_path):
    data = (HEADER + "\n" + ",".join(GOOD) + "\n").encode() + b"TK-2,\xff\xfe,x\n"
    with pytest.raises(DataError) as err:
        process(tmp_path, data)
    assert "pesanan_2026-11-10.csv" in str(err.value)
    assert "UTF-8" in str(err.value)


@pytest.mark.parametrize("good_rows", [1, 500])
def test_undecodable_bytes_are_located_by_their_real_line_and_byte_offset(tmp_path, good_rows):
    """Regression: the message said `near line 1` for any bad byte in a small file (text is
    decoded in 8 KiB chunks before the csv reader counts lines), so the location was wrong."""
    head = (HEADER + "\n" + "".join(",".join(row(order_id=f"TK-{i}")) + "\n"
                                     for i in range(good_rows))).encode()
    data = head + b"TK-X,2026-11-10 10:00:00,CUST-1,Band\xc3ung,Kaos,1,5,0\n" + head[:200]
    with pytest.raises(DataError) as err:
        process(tmp_path, b"\xef\xbb\xbf" + data)
    line = good_rows + 2
    offset = 3 + len(head) + len("TK-X,2026-11-10 10:00:00,CUST-1,Band")
    assert f"line {line}, byte offset {offset}" in str(err.value)


def test_a_late_undecodable_byte_leaves_no_half_closed_parquet_writer(tmp_path, monkeypatch):
    """Regression: when the bad byte came after the first 8 KiB, extract raised with its
    ParquetWriter still open on the deleted temporary file; its __del__ later failed with
    'write to closed file' (an unraisable exception)."""
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    rows = "".join(",".join(row(order_id=f"TK-{i}")) + "\n" for i in range(500))
    with pytest.raises(DataError):
        process(tmp_path, (HEADER + "\n" + rows).encode() + b"TK-X,\xff\n")
    gc.collect()
    assert unraisable == []
    assert list((tmp_path / "staging").iterdir()) == []


def test_a_header_only_file_is_a_valid_empty_partition(tmp_path):
    out = process(tmp_path, HEADER + "\n")
    assert out.extracted == 0
    assert out.valid == {}
    assert out.rejected == []


@pytest.mark.parametrize("content", [None, b""])
def test_a_missing_or_zero_byte_file_is_not_a_partition(tmp_path, content):
    raw = tmp_path / "raw"
    raw.mkdir()
    if content is not None:
        (raw / f"pesanan_{DAY}.csv").write_bytes(content)
    with pytest.raises(MissingPartitionError) as err:
        extract(raw, DAY, tmp_path / "staging")
    assert f"pesanan_{DAY}.csv" in str(err.value)
    assert not (tmp_path / "staging").exists()


def test_year_0000_is_not_a_calendar_date_time(tmp_path):
    """Regression: `0000-01-01 00:00:00` was accepted as a timestamp by DuckDB and quarantined
    as wrong_date; it is not a real calendar date-time (bad_order_ts), as the reference says."""
    assert one_row_reason(tmp_path, order_ts="0000-01-01 00:00:00") == "bad_order_ts"
    assert one_row_reason(tmp_path, order_ts="0001-01-01 00:00:00") == "wrong_date"


# -- differential: the same rows through the plain-Python reference (devtools/reference.py) ---

FIELD_VALUES = {
    "order_ts": st.sampled_from([
        "2026-11-10 10:00:00", "2026-11-10T23:59:59.999999", "2026-11-10T00:00:00+07:00",
        "2026-11-09T17:00:00Z", "2026-11-10T16:59:59Z", "2026-11-10T17:00:00Z",
        "2026-11-10 10:22:10.25", "2026-11-10T05:30:15+02:00", "2026-11-09T20:15:09-05:00",
        "2026-11-10 10:00", "2026-11-31 10:00:00", "2026-02-29 10:00:00", "10/11/2026 10:00",
        "2026-11-10T10:00:00+0700", "2026-11-10 24:00:00", " 2026-11-10 10:00:00\t", "",
        "2026-11-11 00:00:00", "2026-11-10T10:00:00+14:00", "2026-11-10T10:00:00-12:00",
        "0000-01-01 00:00:00", "2026-11-10 10:00:00.1234567", "2026-11-10T10:00:00.000000Z",
    ]),
    "kota": st.sampled_from(["Bandung", " jakarta  selatan", "MEDAN", "", "  ", "\t",
                             "kota\tbaru", "o'neil", "ß straße", "\u00a0", "surabaya "]),
    "qty": st.sampled_from(["1", "02", "0", "-1", "2.5", "", "abc", "2147483647", "2147483648",
                            " 3 ", "00000000002", "+1", "1e3", "99999999999999999999"]),
    "harga_satuan": st.sampled_from(["1000", "59000.50", "0", "0.10", "89500.5", "12500.505",
                                     "Rp10.000", "38,000", "-1", "", ".5", "5.",
                                     "9999999999999999.99", "5000000000000000", " 12 ",
                                     "0000000000000000001.25"]),
    "diskon": st.sampled_from(["", " ", "0", "1000", "0.10", "10%", "-5", "1.005", "100000.01",
                               "59000.50", "99999999999999999999"]),
}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_row_gets_the_same_outcome_as_the_reference_implementation(tmp_path_factory, data):
    from devtools.reference import check_row

    tmp = tmp_path_factory.mktemp("diff")
    n = data.draw(st.integers(min_value=1, max_value=25))
    rows = []
    for i in range(n):
        values = row(order_id=data.draw(st.sampled_from([f"TK-{i}", f" TK-{i} ", "", "  "])))
        for name, strategy in FIELD_VALUES.items():
            if data.draw(st.booleans()):
                values[FIELDS[name]] = data.draw(strategy)
        rows.append(values)
    out = process(tmp, csv_text(rows))
    reasons = out.reasons()
    for i, values in enumerate(rows):
        expected = check_row(values, DAY)
        line = i + 2
        if isinstance(expected, str):
            assert reasons.get(line) == expected, (values, out.valid.get(values[0].strip()))
            continue
        assert line not in reasons, (values, reasons[line])
        got = out.valid[expected[0]]
        _, ts, customer, kota, produk, qty, price, disc, bruto = expected
        assert (got["order_ts"], got["customer_id"], got["kota"], got["produk"], got["qty"]) == (
            ts, customer, kota, produk, qty), values
        assert (got["harga_satuan"], got["diskon"], got["bruto"], got["bersih"]) == (
            f"{price:.2f}", f"{disc:.2f}", f"{bruto:.2f}", f"{bruto - disc:.2f}"), values


def test_valid_rows_are_written_in_order_id_order_across_every_batch(tmp_path):
    """The valid rows are sorted with their typed values and get their text after the sort;
    the text must keep the sorted order on every thread and batch (the warehouses' indexes
    grow at their ends only then)."""
    from devtools.samples import generate_partition
    from tokokita_etl.orders.transform import STREAM_ROWS

    raw = tmp_path / "raw"
    generate_partition(raw / f"pesanan_{DAY.isoformat()}.csv", DAY, 3 * STREAM_ROWS, seed=5)
    staging = tmp_path / "staging"
    extract(raw, DAY, staging)
    result = transform(DAY, staging, tz="Asia/Jakarta")
    valid = pq.ParquetFile(staging / VALID_ROWS)
    assert valid.metadata.num_row_groups >= 3
    ids = pq.read_table(staging / VALID_ROWS, columns=["order_id"]).column(0).to_pylist()
    assert len(ids) == result.valid
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_more_distinct_kota_and_produk_than_an_enum_holds_are_kept_as_text(tmp_path):
    """Kota and produk are kept as ENUMs of their distinct values up to MAX_ENUM_VALUES of
    them, and as text beyond: every row still gets its own normalised kota and produk."""
    from tokokita_etl.orders.transform import MAX_ENUM_VALUES

    n = MAX_ENUM_VALUES + 5
    rows = [row(order_id=f"TK-{i}", kota=f" kota  {i}x ", produk=f"  Produk {i} ")
            for i in range(n)]
    out = process(tmp_path, csv_text(rows))
    assert len(out.valid) == n
    assert all((out.valid[f"TK-{i}"]["kota"], out.valid[f"TK-{i}"]["produk"])
               == (f"Kota {i}X", f"Produk {i}") for i in range(n))
