"""The reference implementation (devtools/reference.py) reproduces every figure of
data/raw/EXPECTED.md and finds the counts the generator (devtools/samples.py) wrote."""

from __future__ import annotations

import csv
import os
import re
import uuid
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from devtools.reference import (
    QUARANTINE_HEADER,
    REASONS,
    ReferenceDataError,
    check_row,
    parse_order_ts,
    run_reference,
)
from devtools.samples import DIRT_WEIGHTS, generate_partition

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "data" / "raw"
EXPECTED_MD = RAW / "EXPECTED.md"
DAYS = (date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 4))
HEADER = "order_id,order_ts,customer_id,kota,produk,qty,harga_satuan,diskon\n"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _section(text: str, heading: str) -> str:
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def _table(section: str, first_header: str) -> list[dict[str, str]]:
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    header = _cells(lines[start])
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, _cells(line), strict=True)))
    return rows


def _expected() -> dict[date, dict]:
    """The figures of EXPECTED.md, per partition date."""
    text = EXPECTED_MD.read_text(encoding="utf-8")
    totals = {
        r["file"]: r for r in _table(_section(text, "## Totals"), "file")
    }
    reasons = _table(_section(text, "## Quarantine count per reason"), "reason")
    out = {}
    for day in DAYS:
        d = day.isoformat()
        section = _section(text, f"## {d}" + (" (the reference partition)" if d.endswith("02") else ""))
        total = totals[f"pesanan_{d}.csv"]
        gold = re.search(rf"`summary_harian_{d}\.csv`\n\n```\n(.*?)```", text, re.S)
        out[day] = {
            "extracted": int(total["extracted"]),
            "karantina_total": int(total["karantina"]),
            "duplikat": int(total["duplikat"]),
            "quarantine_rows": int(total["quarantine file rows"]),
            "fact": int(total["fact"]),
            "summary": int(total["summary rows"]),
            "bruto": Decimal(total["bruto"]),
            "bersih": Decimal(total["bersih"]),
            "karantina": {
                r["reason"]: int(r[d]) for r in reasons if r["reason"] in REASONS
            },
            "kota": _table(section, "kota"),
            "lines": _table(section, "line") if "| line |" in section else [],
            "gold": gold.group(1).encode("utf-8"),
        }
    return out


EXPECTED = _expected()


def _run_all(tmp_path: Path, url: str) -> dict[date, dict]:
    return {
        day: run_reference(
            RAW / f"pesanan_{day.isoformat()}.csv", day, url, tmp_path / "gold", tmp_path / "q"
        )
        for day in DAYS
    }


def _read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def sqlite_results(tmp_path_factory) -> tuple[Path, dict[date, dict]]:
    out = tmp_path_factory.mktemp("reference")
    return out, _run_all(out, f"sqlite:///{out / 'warehouse.db'}")


@pytest.mark.parametrize("day", DAYS, ids=str)
def test_counts_match_expected_md(sqlite_results, day):
    _, results = sqlite_results
    got, want = results[day], EXPECTED[day]
    assert got["extracted"] == want["extracted"]
    assert got["karantina"] == want["karantina"]
    assert sum(got["karantina"].values()) == want["karantina_total"]
    assert got["duplikat"] == want["duplikat"]
    assert got["fact"] == want["fact"]
    assert got["summary"] == want["summary"]
    assert got["extracted"] == want["karantina_total"] + want["duplikat"] + want["fact"]


@pytest.mark.parametrize("day", DAYS, ids=str)
def test_summary_and_gold_match_expected_md(sqlite_results, day):
    _, results = sqlite_results
    gold = Path(results[day]["gold"])
    assert gold.name == f"summary_harian_{day.isoformat()}.csv"
    data = gold.read_bytes()
    assert data == EXPECTED[day]["gold"]
    rows = _read_rows(gold)
    want = EXPECTED[day]["kota"]
    assert [r["kota"] for r in rows] == [w["kota"] for w in want]
    for r, w in zip(rows, want, strict=True):
        assert r["order_date"] == day.isoformat()
        for col in ("jumlah_pesanan", "total_qty", "bruto", "bersih"):
            assert r[col] == w[col], (r["kota"], col)
    assert sum(Decimal(r["bruto"]) for r in rows) == EXPECTED[day]["bruto"]
    assert sum(Decimal(r["bersih"]) for r in rows) == EXPECTED[day]["bersih"]


@pytest.mark.parametrize("day", DAYS, ids=str)
def test_quarantine_file_matches_expected_md(sqlite_results, day):
    out, results = sqlite_results
    path = out / "q" / f"karantina_{day.isoformat()}.csv"
    assert results[day]["quarantine"] == path
    data = path.read_bytes()
    assert data.startswith((",".join(QUARANTINE_HEADER) + "\n").encode())
    assert b"\r" not in data
    rows = _read_rows(path)
    assert len(rows) == EXPECTED[day]["quarantine_rows"]
    expected_lines = {
        int(r["line"]): r["outcome"]
        for r in EXPECTED[day]["lines"]
        if r["outcome"] not in ("fact", "ignored")
    }
    assert {int(r["line"]): r["reason"] for r in rows} == expected_lines
    assert [int(r["line"]) for r in rows] == sorted(int(r["line"]) for r in rows)
    for r in rows:
        assert r["order_date"] == day.isoformat()
        if r["reason"] == "malformed_row":
            assert r["raw"] and not r["order_id"]
        else:
            assert r["raw"] == ""


def test_reference_figures_2026_11_02(sqlite_results):
    _, results = sqlite_results
    r = results[date(2026, 11, 2)]
    assert (r["extracted"], r["fact"], r["duplikat"], r["summary"]) == (8, 8, 0, 4)
    assert sum(r["karantina"].values()) == 0
    rows = _read_rows(Path(r["gold"]))
    assert len({row["kota"] for row in rows}) == 4
    gross = sum(Decimal(row["bruto"]) for row in rows)
    net = sum(Decimal(row["bersih"]) for row in rows)
    assert f"Rp{gross:,.2f}" == "Rp3,542,000.00"
    assert f"Rp{net:,.2f}" == "Rp3,092,000.00"
    assert (RAW / "pesanan_2026-11-02.csv").stat().st_size == 771


def test_quarantine_keeps_raw_values(sqlite_results):
    out, _ = sqlite_results
    rows = {int(r["line"]): r for r in _read_rows(out / "q" / "karantina_2026-11-03.csv")}
    assert rows[7]["order_id"] == "   "  # untrimmed
    assert rows[16]["kota"] == "   "
    assert rows[29]["raw"] == (
        'TK-20261103-0028,2026-11-03 14:30:00,CUST-13104,"Bandung"x,Dompet Kulit,1,175000,0'
    )
    rows4 = {int(r["line"]): r for r in _read_rows(out / "q" / "karantina_2026-11-04.csv")}
    assert rows4[15]["harga_satuan"] == "38,000"
    assert rows4[24]["raw"] == (
        'TK-20261104-0021,2026-11-04 16:00:00,CUST-14018,Medan,"Kemeja Flanel,,1,120000,0'
    )


def test_fact_table_after_three_days(sqlite_results):
    import sqlite3

    out, _ = sqlite_results
    conn = sqlite3.connect(out / "warehouse.db")
    try:
        fact = dict(conn.execute("SELECT order_date, COUNT(*) FROM reference_fact GROUP BY 1"))
        ts = dict(conn.execute("SELECT order_id, order_ts FROM reference_fact"))
        late = conn.execute(
            "SELECT order_date, kota FROM reference_fact WHERE order_id = 'TK-20261103-0010'"
        ).fetchone()
    finally:
        conn.close()
    assert fact == {"2026-11-02": 8, "2026-11-03": 10, "2026-11-04": 7}
    assert ts["TK-20261103-0004"] == "2026-11-03T10:22:10.250000+07:00"
    assert ts["TK-20261103-0011"] == "2026-11-03T03:15:00+07:00"
    assert ts["TK-20261104-0004"] == "2026-11-04T00:00:00+07:00"
    assert late == ("2026-11-04", "Surabaya")
    # the id 04 reused from 02 stays with 02
    assert ts["TK-20261102-0003"] == "2026-11-02T10:03:12+07:00"


def test_rerun_is_identical_and_not_an_other_partition(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    first = _run_all(tmp_path / "a", url)
    gold = {d: Path(r["gold"]).read_bytes() for d, r in first.items()}
    again = run_reference(
        RAW / "pesanan_2026-11-03.csv", DAYS[1], url, tmp_path / "b" / "gold", tmp_path / "b" / "q"
    )
    assert again["fact"] == EXPECTED[DAYS[1]]["fact"]
    assert again["karantina"]["order_id_in_other_partition"] == 0
    assert Path(again["gold"]).read_bytes() == gold[DAYS[1]]


def _pg_admin(url: str) -> str:
    rest = url.split("://", 1)[1]
    return "postgresql://" + rest.split("?", 1)[0]


@pytest.fixture
def reference_pg_url():
    url = os.environ["TOKOKITA_TEST_PG_URL"]  # set by tests/conftest.py for every run
    import psycopg

    schema = f"reference_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_pg_admin(url), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(_pg_admin(url), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.postgres
def test_postgresql_gives_identical_outputs(sqlite_results, reference_pg_url, tmp_path):
    sqlite_out, sqlite_res = sqlite_results
    pg_res = _run_all(tmp_path, reference_pg_url)
    for day in DAYS:
        name = f"summary_harian_{day.isoformat()}.csv"
        assert (tmp_path / "gold" / name).read_bytes() == (sqlite_out / "gold" / name).read_bytes()
        q = f"karantina_{day.isoformat()}.csv"
        assert (tmp_path / "q" / q).read_bytes() == (sqlite_out / "q" / q).read_bytes()
        for key in ("extracted", "karantina", "duplikat", "fact", "summary"):
            assert pg_res[day][key] == sqlite_res[day][key]


# --- whole-partition failures and edge rows ---------------------------------------------


def _run_text(tmp_path: Path, data: bytes, day: date = date(2026, 11, 5)) -> dict:
    raw = tmp_path / f"pesanan_{day.isoformat()}.csv"
    raw.write_bytes(data)
    return run_reference(raw, day, f"sqlite:///{tmp_path / 'wh.db'}", tmp_path / "g", tmp_path / "q")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a partition"),
        (b"order_id,order_ts,kota\nx,y,z\n", "missing required column"),
        (HEADER.rstrip("\n").encode() + b",kota\n", "duplicated header"),
        (HEADER.encode() + b"TK-1,2026-11-05 10:00:00,C,Bandung,Kopi \xff,1,1000,0\n", "byte offset"),
        (b"\n\n", "no header"),
    ],
)
def test_partition_failures(tmp_path, data, message):
    with pytest.raises(ReferenceDataError, match=message):
        _run_text(tmp_path, data)
    assert not (tmp_path / "g").exists()


def test_undecodable_byte_offset_and_nothing_loaded(tmp_path):
    good = HEADER + "TK-1,2026-11-05 10:00:00,C,Bandung,Kopi,1,1000,0\n"
    data = good.encode() + b"TK-2,2026-11-05 10:00:00,C,Bandung,Kopi \xff,1,1000,0\n"
    offset = len(good.encode()) + len("TK-2,2026-11-05 10:00:00,C,Bandung,Kopi ")
    with pytest.raises(ReferenceDataError, match=rf"byte offset {offset} \(line 3\)"):
        _run_text(tmp_path, data)


def test_header_only_and_blank_lines(tmp_path):
    result = _run_text(tmp_path, b"\xef\xbb\xbf" + HEADER.encode())
    assert (result["extracted"], result["fact"], result["summary"]) == (0, 0, 0)
    assert Path(result["gold"]).read_bytes() == (
        b"order_date,kota,jumlah_pesanan,total_qty,bruto,bersih\n"
    )
    text = HEADER + "\n" + "TK-1,2026-11-05 10:00:00,C,Bandung,Kopi,1,1000,\r\n" + "\n"
    result = _run_text(tmp_path, text.encode())
    assert (result["extracted"], result["fact"]) == (1, 1)


def test_extra_columns_any_order(tmp_path):
    text = (
        " diskon ,harga_satuan,qty,produk,kota,catatan,customer_id,order_ts,order_id\n"
        ",1500.5,2,Kopi,\"kota  BARU\",hai,C,2026-11-05T10:00:00,TK-1\n"
    )
    result = _run_text(tmp_path, text.encode())
    assert Path(result["gold"]).read_text() == (
        "order_date,kota,jumlah_pesanan,total_qty,bruto,bersih\n"
        "2026-11-05,Kota Baru,1,2,3001.00,3001.00\n"
    )


DAY = date(2026, 11, 5)


@pytest.mark.parametrize(
    ("ts", "ok"),
    [
        ("2026-11-05 00:00:00", True),
        ("2026-11-05T23:59:59.5", True),
        ("2026-11-04T17:00:00Z", True),
        ("2026-11-05T16:59:59Z", True),
        ("2026-11-05T17:00:00Z", False),
        ("2026-11-05T23:59:59-23:59", False),
        ("2026-11-05 06:59:59+14:00", False),
        ("2026-11-05 07:00:00+14:00", True),
        ("2026-11-05 21:00:00+14:00", True),
        ("2026-11-05 10:00", None),
        ("2026-11-05 24:00:00", None),
        ("2026-11-31 10:00:00", None),
        ("2026-11-05 10:00:00.1234567", None),
        ("2026-11-05 10:00:00+0700", None),
        ("2026-11-05 10:00:00+24:00", None),
        ("2026-11-05t10:00:00", None),
        ("2026-11-05 10:00:00z", None),
        ("２026-11-05 10:00:00", None),
    ],
)
def test_order_ts_rules(ts, ok):
    parsed = parse_order_ts(ts)
    if ok is None:
        assert parsed is None
        assert check_row(["X", ts, "C", "K", "P", "1", "1", ""], DAY) == "bad_order_ts"
    else:
        assert parsed is not None
        result = check_row(["X", ts, "C", "K", "P", "1", "1", ""], DAY)
        assert (result != "wrong_date") is ok


@pytest.mark.parametrize(
    ("qty", "price", "disc", "reason"),
    [
        ("2147483647", "0", "", None),
        ("2147483648", "0", "", "bad_qty"),
        ("007", "1", "", None),
        ("١", "1", "", "bad_qty"),
        ("1", "9999999999999999.99", "", None),
        ("1", "10000000000000000", "", "bad_price"),
        ("2", "5000000000000000", "", "bad_price"),
        ("1", "1.", "", "bad_price"),
        ("1", ".5", "", "bad_price"),
        ("1", "1,5", "", "bad_price"),
        ("1", "100", "100", None),
        ("1", "100", "100.00", None),
        ("1", "100", "100.001", "bad_discount"),
        ("1", "100", "+1", "bad_discount"),
        ("1", "100", " \t ", None),
    ],
)
def test_number_rules(qty, price, disc, reason):
    result = check_row(["X", "2026-11-05 10:00:00", "C", "K", "P", qty, price, disc], DAY)
    if reason is None:
        assert isinstance(result, tuple), result
    else:
        assert result == reason


def test_normalisation():
    result = check_row(
        ["  X ", "2026-11-05T03:05:00Z", " C ", " jakarta \t selatan ", " P ", "3", "0.5", ""],
        DAY,
    )
    order_id, ts, customer, kota, produk, qty, price, disc, bruto = result
    assert (order_id, ts, customer, kota, produk, qty) == (
        "X", "2026-11-05T10:05:00+07:00", "C", "Jakarta Selatan", "P", 3,
    )
    assert (f"{price:.2f}", f"{disc:.2f}", f"{bruto:.2f}") == ("0.50", "0.00", "1.50")


# --- a generated partition: the generator's counts are what the reference finds ----------


def test_counts_are_what_a_contract_loader_finds(tmp_path):
    day = date(2026, 11, 12)
    raw = tmp_path / "raw" / "pesanan_2026-11-12.csv"
    counts = generate_partition(raw, day, 30_000, seed=11, dirt=0.25, duplicates=0.05)
    result = run_reference(
        raw, day, f"sqlite:///{tmp_path / 'wh.db'}", tmp_path / "gold", tmp_path / "q"
    )
    assert result["extracted"] == counts["rows"]
    assert result["fact"] == counts["fact"]
    assert result["duplikat"] == counts["duplicate"]
    for reason in DIRT_WEIGHTS:
        assert result["karantina"][reason] == counts[reason], reason
    assert result["karantina"]["order_id_in_other_partition"] == 0


def test_a_quoted_field_longer_than_the_csv_modules_limit_stays_one_field(tmp_path):
    """Bug: the reference read a quoted notes field over 131,072 characters (the csv module's
    default limit) as a malformed record followed by records made of the field's own text,
    as the pipeline's extract did."""
    note = '"' + "x" * 140_000 + "\nFAKE-1,2026-11-05 10:00:00,C,Medan,P,1,999999,0,\n" + '"'
    text = (f"{HEADER.rstrip()},catatan\nTK-1,2026-11-05 10:00:00,C,Bandung,Kopi,1,1000,0,{note}\n"
            "TK-2,2026-11-05 11:00:00,C,Bandung,Kopi,1,1000,0,ok\n")
    result = _run_text(tmp_path, text.encode())
    assert (result["extracted"], result["fact"], sum(result["karantina"].values())) == (2, 2, 0)
