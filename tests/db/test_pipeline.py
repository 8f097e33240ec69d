"""Whole runs of the sample partitions on SQLite and PostgreSQL: figures, outputs, checksums.

The expected figures are the hand-computed ones of data/raw/EXPECTED.md (2026-11-02: 8 rows,
4 kota, gross Rp3,542,000.00, net Rp3,092,000.00).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.conftest import HEADER, SAMPLE_DATES, Workspace, csv_text, read_csv_rows
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.schema import fact_rows, summary_rows
from tokokita_etl.runner.sequence import run_for_date
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.warehouse.checksums import canonical_line
from tokokita_etl.warehouse.database import Warehouse

D02, D03, D04 = SAMPLE_DATES

GOLD = {
    D02: """order_date,kota,jumlah_pesanan,total_qty,bruto,bersih
2026-11-02,Bandung,2,6,810000.00,729000.00
2026-11-02,Jakarta Selatan,2,4,717000.00,627000.00
2026-11-02,Medan,2,3,567000.00,498000.00
2026-11-02,Surabaya,2,2,1448000.00,1238000.00
""",
    D03: """order_date,kota,jumlah_pesanan,total_qty,bruto,bersih
2026-11-03,Bandung,2,6,474001.50,449001.50
2026-11-03,Jakarta Selatan,2,3,820000.00,775000.00
2026-11-03,Medan,3,4,349500.50,319500.50
2026-11-03,Surabaya,3,4,618500.00,593500.00
""",
    D04: """order_date,kota,jumlah_pesanan,total_qty,bruto,bersih
2026-11-04,Bandung,1,2,70000.00,70000.00
2026-11-04,Jakarta Selatan,3,4,648000.00,639000.00
2026-11-04,Medan,1,2,238000.00,219000.00
2026-11-04,Surabaya,2,5,565000.00,545000.00
""",
}

#: extracted, karantina, duplikat, quarantine file rows, fact, summary, bruto, bersih
TOTALS = {
    D02: (8, 0, 0, 0, 8, 4, "3542000.00", "3092000.00"),
    D03: (36, 23, 3, 26, 10, 4, "2262002.00", "2137002.00"),
    D04: (22, 14, 1, 15, 7, 4, "1521000.00", "1473000.00"),
}

QUARANTINE_LINES = {
    D02: {},
    D03: {
        6: "missing_order_id", 7: "missing_order_id",
        8: "bad_order_ts", 9: "bad_order_ts", 10: "bad_order_ts",
        11: "wrong_date", 13: "wrong_date", 14: "wrong_date",
        15: "missing_kota", 16: "missing_kota",
        17: "bad_qty", 18: "bad_qty", 19: "bad_qty", 20: "bad_qty", 34: "bad_qty",
        21: "bad_price", 22: "bad_price", 23: "bad_price",
        24: "bad_discount", 25: "bad_discount",
        27: "malformed_row", 28: "malformed_row", 29: "malformed_row",
        30: "duplicate", 31: "duplicate", 33: "duplicate",
    },
    D04: {
        4: "order_id_in_other_partition",
        6: "wrong_date", 10: "wrong_date",
        8: "bad_order_ts", 9: "bad_order_ts",
        12: "missing_order_id", 13: "missing_kota", 14: "bad_qty", 15: "bad_price",
        16: "bad_discount", 17: "bad_discount",
        18: "malformed_row", 19: "malformed_row", 24: "malformed_row",
        21: "duplicate",
    },
}

FACT_LINES = {
    D03: {2, 3, 4, 5, 12, 26, 32, 35, 36, 37},
    D04: {2, 3, 5, 7, 20, 22, 23},
}


def run(ws: Workspace, day: date, **kwargs):
    lines: list[str] = []
    outcome = run_for_date(ORDERS, ws.settings(), day, log=lines.append, **kwargs)
    outcome.log = lines
    return outcome


def warehouse_rows(ws: Workspace, sql: str, **params) -> list[tuple]:
    wh = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    with wh.begin() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params).all()]


def day_param(ws: Workspace, day: date):
    return Warehouse(ws.warehouse_url, "Asia/Jakarta").day_param(day)


def canonical(ws: Workspace, day: date) -> tuple[list, list]:
    wh = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    with wh.begin() as conn:
        return list(fact_rows(wh, conn, day)), list(summary_rows(wh, conn, day))


def test_reference_partition_2026_11_02_has_the_reference_figures(workspace):
    workspace.copy_samples(D02)
    outcome = run(workspace, D02)
    assert (outcome.status, outcome.exit_code, outcome.attempt) == ("success", 0, 1)
    entry = StateStore(workspace.state_file, "orders").read().entry(D02)
    assert entry["rows"] == {"extracted": 8, "karantina": 0, "duplikat": 0, "fact": 8, "summary": 4}
    assert (entry["bruto"], entry["bersih"]) == ("3542000.00", "3092000.00")
    assert set(entry["checksums"]) == {"fact_2026-11-02", "summary_2026-11-02"}
    assert workspace.gold_file(D02).read_bytes() == GOLD[D02].encode()
    assert read_csv_rows(workspace.quarantine_file(D02)) == []
    assert any("Rp3,542,000.00 bruto, Rp3,092,000.00 bersih" in line for line in outcome.log)
    assert sum("[validate] OK" in line for line in outcome.log) == 3
    d = day_param(workspace, D02)
    [(n, kotas)] = warehouse_rows(
        workspace, "SELECT COUNT(*), COUNT(DISTINCT kota) FROM fact_pesanan WHERE order_date = :d", d=d)
    assert (n, kotas) == (8, 4)
    assert len(warehouse_rows(workspace, "SELECT * FROM summary_harian WHERE order_date = :d", d=d)) == 4
    assert workspace.leftovers() == []


def test_sample_partitions_in_date_order_match_the_hand_computed_figures(workspace):
    workspace.copy_samples()
    for day in SAMPLE_DATES:
        outcome = run(workspace, day)
        assert (outcome.status, outcome.exit_code) == ("success", 0), outcome.log

    state = StateStore(workspace.state_file, "orders").read()
    for day in SAMPLE_DATES:
        extracted, karantina, duplikat, qrows, fact, summary, bruto, bersih = TOTALS[day]
        entry = state.entry(day)
        assert entry["rows"] == {"extracted": extracted, "karantina": karantina,
                                 "duplikat": duplikat, "fact": fact, "summary": summary}, day
        assert (entry["bruto"], entry["bersih"]) == (bruto, bersih)
        assert extracted == karantina + duplikat + fact

        quarantined = read_csv_rows(workspace.quarantine_file(day))
        assert len(quarantined) == qrows
        assert {int(r["line"]): r["reason"] for r in quarantined} == QUARANTINE_LINES[day]
        assert [int(r["line"]) for r in quarantined] == sorted(int(r["line"]) for r in quarantined)
        assert Counter(r["reason"] for r in quarantined if r["reason"] != "duplicate").total() \
            == karantina
        assert workspace.gold_file(day).read_bytes() == GOLD[day].encode()

        d = day_param(workspace, day)
        table = warehouse_rows(workspace, "SELECT line, reason FROM karantina WHERE order_date = :d "
                               "ORDER BY line", d=d)
        assert dict(table) == QUARANTINE_LINES[day]
        assert warehouse_rows(workspace, "SELECT COUNT(*) FROM fact_pesanan WHERE order_date = :d",
                              d=d) == [(fact,)]
        summary_rows = warehouse_rows(
            workspace, "SELECT kota, jumlah_pesanan, total_qty, bruto, bersih FROM summary_harian "
            "WHERE order_date = :d", d=d)
        gold_rows = read_csv_rows(workspace.gold_file(day))
        assert {(k, int(n), int(q), Decimal(str(b)), Decimal(str(s))) for k, n, q, b, s in summary_rows} \
            == {(g["kota"], int(g["jumlah_pesanan"]), int(g["total_qty"]), Decimal(g["bruto"]),
                 Decimal(g["bersih"])) for g in gold_rows}
    assert warehouse_rows(workspace, "SELECT COUNT(*) FROM fact_pesanan") == [(25,)]
    assert workspace.leftovers() == []


def test_sample_fact_rows_hold_the_normalised_values(sqlite_workspace):
    """On SQLite; PostgreSQL gives the same canonical rows (the cross-backend test below)."""
    workspace = sqlite_workspace
    workspace.copy_samples()
    for day in SAMPLE_DATES:
        assert run(workspace, day).status == "success"
    fact03 = {r[0]: r for r in canonical(workspace, D03)[0]}
    assert fact03["TK-20261103-0002"][4] == "Jakarta Selatan"
    assert fact03["TK-20261103-0002"][8] == "0.00"
    assert fact03["TK-20261103-0001"][2] == "2026-11-03T07:12:05+07:00"
    assert fact03["TK-20261103-0003"][2:9] == [
        "2026-11-03T09:05:44+07:00", "CUST-13022", "Bandung", "Kaos Polos Hitam", 3, "59000.50",
        "10000.00"]
    assert fact03["TK-20261103-0004"][2] == "2026-11-03T10:22:10.250000+07:00"
    assert fact03["TK-20261103-0004"][5] == "Kaos Polos, Putih"
    assert fact03["TK-20261103-0011"][2] == "2026-11-03T03:15:00+07:00"
    assert fact03["TK-20261103-0025"][9:] == ["20000.00", "0.00"]
    assert fact03["TK-20261103-0029"][6] == 2
    assert (fact03["TK-20261103-0030"][4], fact03["TK-20261103-0030"][6]) == ("Bandung", 3)
    assert fact03["TK-20261103-0032"][2] == "2026-11-03T23:59:59.999999+07:00"
    assert fact03["TK-20261103-0032"][4] == "Medan"
    assert fact03["TK-20261103-0032"][7] == "89500.50"

    fact04 = {r[0]: r for r in canonical(workspace, D04)[0]}
    assert fact04["TK-20261103-0010"][1:3] == ["2026-11-04", "2026-11-04T01:30:00+07:00"]
    assert fact04["TK-20261104-0004"][2] == "2026-11-04T00:00:00+07:00"
    assert fact04["TK-20261104-0006"][6] == 2
    assert fact04["TK-20261104-0018"][4:9] == ["Surabaya", "Kaos Polos, Putih", 4, "79000.00", "0.00"]
    assert fact04["TK-20261104-0019"][4] == "Jakarta Selatan"
    assert fact04["TK-20261104-0020"][9] == "0.00"
    # the id already loaded under 2026-11-02 stays there, untouched
    fact02 = {r[0]: r for r in canonical(workspace, D02)[0]}
    assert fact02["TK-20261102-0003"][1] == "2026-11-02"
    assert "TK-20261102-0003" not in fact04


def test_quarantine_file_keeps_raw_untrimmed_fields_and_malformed_raw_text(sqlite_workspace):
    workspace = sqlite_workspace
    workspace.copy_samples()
    for day in SAMPLE_DATES:
        run(workspace, day)
    rows = {int(r["line"]): r for r in read_csv_rows(workspace.quarantine_file(D04))}
    assert rows[24]["raw"] == \
        'TK-20261104-0021,2026-11-04 16:00:00,CUST-14018,Medan,"Kemeja Flanel,,1,120000,0'
    assert all(rows[24][c] == "" for c in HEADER.split(","))
    assert rows[12]["order_id"] == " "
    assert rows[15]["harga_satuan"] == "38,000"
    assert rows[4]["order_id"] == "TK-20261102-0003"
    assert rows[4]["raw"] == ""
    rows03 = {int(r["line"]): r for r in read_csv_rows(workspace.quarantine_file(D03))}
    assert not rows03[27]["raw"].endswith("\r")  # the partition has \r\n line ends
    assert rows03[27]["raw"].startswith("TK-20261103-0026,")
    raw_bytes = workspace.quarantine_file(D03).read_bytes()
    assert b"\r\n" not in raw_bytes.replace(b'"\r\n', b"")
    assert not raw_bytes.startswith(b"\xef\xbb\xbf")


@pytest.mark.postgres
def test_sqlite_and_postgresql_give_identical_checksums_gold_and_quarantine_bytes(tmp_path, pg_url):
    spaces = {
        "sqlite": Workspace(tmp_path / "lite", f"sqlite:///{tmp_path / 'lite' / 'wh.db'}"),
        "postgresql": Workspace(tmp_path / "pg", pg_url),
    }
    outputs = {}
    for name, ws in spaces.items():
        ws.copy_samples()
        for day in SAMPLE_DATES:
            assert run(ws, day).status == "success"
        state = StateStore(ws.state_file, "orders").read()
        outputs[name] = {
            day: (state.entry(day)["checksums"], state.entry(day)["rows"],
                  ws.gold_file(day).read_bytes(), ws.quarantine_file(day).read_bytes(),
                  canonical(ws, day))
            for day in SAMPLE_DATES
        }
    for day in SAMPLE_DATES:
        lite, pg = outputs["sqlite"][day], outputs["postgresql"][day]
        assert lite[0] == pg[0], f"checksums differ for {day}"
        assert lite[1] == pg[1]
        assert lite[2] == pg[2], f"gold bytes differ for {day}"
        assert lite[3] == pg[3], f"quarantine bytes differ for {day}"
        assert lite[4] == pg[4], f"canonical rows differ for {day}"


def test_money_sums_are_exact_where_binary_floating_point_would_drift(workspace):
    day = date(2026, 11, 20)
    prices = ["0.10", "0.20"] * 150
    rows = [[f"TK-{i:04d}", "2026-11-20 10:00:00", "CUST-1", "Medan" if i % 2 else "Bandung",
             "Permen", "1", price, ""] for i, price in enumerate(prices)]
    rows += [[f"TK-X{i:03d}", "2026-11-20 11:00:00", "CUST-2", "Medan", "Permen", "3", "0.10", "0.10"]
             for i in range(10)]
    workspace.write_partition(day, csv_text(rows))
    outcome = run(workspace, day)
    assert outcome.status == "success", outcome.log

    expected_bruto = sum((Decimal(p) for p in prices), Decimal(0)) + 10 * 3 * Decimal("0.10")
    expected_bersih = expected_bruto - 10 * Decimal("0.10")
    assert expected_bruto == Decimal("48.00")
    float_bruto = sum(float(p) for p in prices) + sum(3 * 0.10 for _ in range(10))
    assert float_bruto != 48.0  # the float sum drifts; the pipeline's must not
    assert f"{float_bruto!r}" != "48.0"

    assert (outcome.entry["bruto"], outcome.entry["bersih"]) == ("48.00", f"{expected_bersih:.2f}")
    assert workspace.gold_file(day).read_text() == (
        "order_date,kota,jumlah_pesanan,total_qty,bruto,bersih\n"
        "2026-11-20,Bandung,150,150,15.00,15.00\n"
        "2026-11-20,Medan,160,180,33.00,32.00\n"
    )
    d = day_param(workspace, day)
    summary = warehouse_rows(workspace, "SELECT kota, bruto, bersih FROM summary_harian "
                             "WHERE order_date = :d ORDER BY kota", d=d)
    assert [(k, Decimal(str(b)), Decimal(str(s))) for k, b, s in summary] == [
        ("Bandung", Decimal("15.00"), Decimal("15.00")), ("Medan", Decimal("33.00"), Decimal("32.00"))]


def test_a_header_only_partition_is_a_valid_empty_run_with_a_header_only_gold_file(workspace):
    day = date(2026, 11, 21)
    workspace.write_partition(day, HEADER + "\n")
    outcome = run(workspace, day)
    assert (outcome.status, outcome.exit_code) == ("success", 0), outcome.log
    assert outcome.entry["rows"] == {"extracted": 0, "karantina": 0, "duplikat": 0, "fact": 0,
                                     "summary": 0}
    assert workspace.gold_file(day).read_text() == \
        "order_date,kota,jumlah_pesanan,total_qty,bruto,bersih\n"
    assert read_csv_rows(workspace.quarantine_file(day)) == []


def test_manifest_records_status_attempt_rows_checksums_gold_stage_durations_and_exit(workspace):
    workspace.copy_samples(D03)
    outcome = run(workspace, D03)
    body = json.loads(Path(outcome.manifest).read_text())
    entry = StateStore(workspace.state_file, "orders").read().entry(D03)
    assert body == outcome.body
    assert Path(outcome.manifest).parent == workspace.runs
    assert Path(outcome.manifest).name.startswith("run-2026-11-03-")
    assert body["partition_date"] == "2026-11-03"
    assert (body["status"], body["attempt"], body["exit_code"]) == ("success", 1, 0)
    assert body["rows"] == entry["rows"]
    assert body["checksums"] == entry["checksums"]
    assert body["gold"] == entry["gold"]
    assert body["gold"].endswith("summary_harian_2026-11-03.csv")
    assert set(body["stages_ms"]) == {"extract", "transform", "load", "validate", "publish_gold"}
    assert entry["status"] == "success"
    assert entry["updated_at"]


def test_a_daily_sum_beyond_numeric_18_2_loads_on_both_backends(workspace):
    """Regression: summary_harian.bruto/bersih were NUMERIC(18,2) on PostgreSQL, so a day whose
    valid rows (each < 10^16) summed past 10^16 failed with 'numeric field overflow' there while
    SQLite loaded it (and SQLite's integer-cents SUM overflowed past ~9.2 * 10^16)."""
    day = date(2026, 11, 22)
    rows = [[f"TK-{i:02d}", "2026-11-22 10:00:00", "CUST-1", "Medan", "Emas", "1",
             "9999999999999999.99", "0.01"] for i in range(20)]
    workspace.write_partition(day, csv_text(rows))
    outcome = run(workspace, day)
    assert outcome.status == "success", outcome.log
    assert workspace.gold_file(day).read_text().splitlines()[1] == \
        "2026-11-22,Medan,20,20,199999999999999999.80,199999999999999999.60"
    assert (outcome.entry["bruto"], outcome.entry["bersih"]) == (
        "199999999999999999.80", "199999999999999999.60")


def test_an_order_id_already_loaded_under_another_date_is_quarantined_not_moved(workspace):
    d1, d2 = date(2026, 11, 23), date(2026, 11, 24)

    def order(order_id: str, day: date, kota: str = "Medan", qty: str = "1") -> list[str]:
        return [order_id, f"{day} 10:00:00", "CUST-1", kota, "Teh", qty, "1000", ""]

    workspace.write_partition(d1, csv_text([order("TK-A", d1), order("TK-B", d1)]))
    workspace.write_partition(d2, csv_text([
        order("TK-A", d2, kota="Bandung"),  # line 2: duplicate, loses to line 4
        order("TK-C", d2),  # line 3
        order("TK-A", d2, qty="5"),  # line 4: the winner, but TK-A belongs to 2026-11-23
    ]))
    assert run(workspace, d1).status == "success"
    second = run(workspace, d2)
    assert second.status == "success", second.log
    assert second.entry["rows"] == {"extracted": 3, "karantina": 1, "duplikat": 1, "fact": 1,
                                    "summary": 1}
    quarantined = read_csv_rows(workspace.quarantine_file(d2))
    assert [(r["line"], r["reason"], r["order_id"], r["qty"]) for r in quarantined] == [
        ("2", "duplicate", "TK-A", "1"), ("4", "order_id_in_other_partition", "TK-A", "5")]
    fact1, _ = canonical(workspace, d1)
    fact2, _ = canonical(workspace, d2)
    assert [(r[0], r[1], r[6]) for r in fact1] == [("TK-A", "2026-11-23", 1), ("TK-B", "2026-11-23", 1)]
    assert [r[0] for r in fact2] == ["TK-C"]

    # once 2026-11-23 no longer holds TK-A, re-running 2026-11-24 loads it there
    workspace.write_partition(d1, csv_text([order("TK-B", d1)]))
    assert run(workspace, d1, force=True).status == "success"
    third = run(workspace, d2, force=True)
    assert third.entry["rows"]["fact"] == 2
    assert [(r[0], r[6]) for r in canonical(workspace, d2)[0]] == [("TK-A", 5), ("TK-C", 1)]
    assert [r["reason"] for r in read_csv_rows(workspace.quarantine_file(d2))] == ["duplicate"]


@pytest.mark.postgres
def test_code_point_order_of_ids_and_kota_is_the_same_on_both_backends(tmp_path, pg_url):
    day = date(2026, 11, 25)
    rows = [[order_id, "2026-11-25 10:00:00", "C", kota, "Teh", "1", "10", ""] for order_id, kota in [
        ("TK-b", "zebra"), ("TK-B", "éclair"), ("TK-a", "Zebra"), ("TK-é", "ábc"), ("TK-Z", "a b"),
        ("TK-10", "medan"), ("TK-9", "Medan")]]
    results = []
    for name, url in (("lite", f"sqlite:///{tmp_path / 'lite.db'}"), ("pg", pg_url)):
        ws = Workspace(tmp_path / name, url)
        ws.write_partition(day, csv_text(rows))
        outcome = run(ws, day)
        assert outcome.status == "success", outcome.log
        results.append((outcome.entry["checksums"], ws.gold_file(day).read_bytes(), canonical(ws, day)))
    assert results[0] == results[1]
    fact, summary = results[0][2]
    assert [r[0] for r in fact] == ["TK-10", "TK-9", "TK-B", "TK-Z", "TK-a", "TK-b", "TK-é"]
    assert [r[1] for r in summary] == ["A B", "Medan", "Zebra", "Ábc", "Éclair"]


def test_a_record_with_a_nul_character_is_malformed_on_both_backends(workspace):
    """Regression: a NUL inside a field loaded on SQLite but failed the whole run on PostgreSQL
    ('invalid byte sequence 0x00'); such a record is now malformed_row, kept with U+FFFD."""
    day = date(2026, 11, 25)
    rows = [["TK-1", "2026-11-25 10:00:00", "CUST-1", "Medan", "Te\x00h", "1", "1000", ""],
            ["TK-2", "2026-11-25 11:00:00", "CUST-2", "Medan", "Kopi", "2", "500", ""]]
    workspace.write_partition(day, csv_text(rows))
    outcome = run(workspace, day)
    assert outcome.status == "success", outcome.log
    assert outcome.entry["rows"]["fact"] == 1
    quarantined = read_csv_rows(workspace.quarantine_file(day))
    assert [(q["order_id"], q["reason"], q["produk"]) for q in quarantined] == [
        ("TK-1", "malformed_row", "Te\ufffdh")]


def test_fact_checksum_is_sha256_of_canonical_json_lines_even_for_values_json_escapes(workspace):
    """Regression guard for the database-built checksum lines (SQLite `json_array`, PostgreSQL
    text concatenation): a value holding a quote, a backslash, a control character or non-ASCII
    text must give the same checksum as `canonical_line` over the stored rows."""
    day = date(2026, 11, 21)
    odd = ['Kaos "Polos"', "Kabel C:\\USB", "Tas\tKanvas", "Kopi Gayo ☕", "Sepatu\x1fLari"]
    rows = [[f"TK-E{i}", "2026-11-21 10:00:00", f"C\\{i}", "Medan", produk, "1", "1000", ""]
            for i, produk in enumerate(odd)]
    rows.append(["TK-E9", "2026-11-21 11:00:00", "C9", "Medan", "Teh", "2", "500", ""])
    workspace.write_partition(day, csv_text(rows))
    outcome = run(workspace, day)
    assert outcome.status == "success", outcome.log
    fact, _summary = canonical(workspace, day)
    assert len(fact) == len(rows)
    expected = hashlib.sha256("".join(canonical_line(r) for r in fact).encode("utf-8")).hexdigest()
    assert outcome.entry["checksums"][f"fact_{day}"] == expected
