"""The pipeline and the reference implementation agree on a partition whose text fields carry
Unicode whitespace (U+00A0, U+3000, U+0085, ...), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from devtools.reference import run_reference
from tests.conftest import csv_text, read_csv_rows
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.sequence import run_for_date

DAY = date(2026, 11, 10)


def test_unicode_whitespace_gives_the_same_gold_and_quarantine_as_the_reference(workspace):
    """Bug: the pipeline trimmed only ASCII whitespace, so 'Depok\\u00a0' and 'Jakarta\\u3000
    Selatan' were cities of their own in the gold file and a kota of only U+00A0 was valid."""
    ts = "2026-11-10 10:00:00"
    rows = [
        ["TK-1", ts, "C1", "Depok", "Kaos", "1", "1000", ""],
        ["TK-2", ts, "C2", "Depok\u00a0", "Kaos", "2", "1000", ""],
        ["TK-3", ts, "C3", "\u00a0depok", "Kaos", "3", "1000", ""],
        ["TK-4", ts, "C4", "Jakarta\u3000Selatan", "Kaos", "1", "2500.50", "0.50"],
        ["TK-5", ts, "C5", "Jakarta Selatan", "Kaos", "1", "2500.50", ""],
        ["TK-6", ts, "C6", "\x85Bogor", "Kaos", "1", "999", ""],
        ["TK-7", ts, "C7", "\u00a0\u3000", "Kaos", "1", "999", ""],
        ["\u00a0TK-8\u00a0", f"\u3000{ts}", "C8", "Bogor", "Kaos", "\u00a01", "10", ""],
    ]
    workspace.write_partition(DAY, csv_text(rows))
    outcome = run_for_date(ORDERS, workspace.settings(), DAY, log=lambda _: None)
    assert outcome.exit_code == 0, outcome.error
    gold = read_csv_rows(workspace.gold_file(DAY))
    assert [(r["kota"], r["jumlah_pesanan"]) for r in gold] == [
        ("Bogor", "2"), ("Depok", "3"), ("Jakarta Selatan", "2")]
    quarantine = read_csv_rows(workspace.quarantine_file(DAY))
    assert [(r["line"], r["reason"]) for r in quarantine] == [("8", "missing_kota")]

    reference = run_reference(workspace.raw / f"pesanan_{DAY.isoformat()}.csv", DAY,
                              workspace.warehouse_url, workspace.root / "ref" / "gold",
                              workspace.root / "ref" / "quarantine")
    assert workspace.gold_file(DAY).read_bytes() == Path(reference["gold"]).read_bytes()
    assert workspace.quarantine_file(DAY).read_bytes() == \
        Path(reference["quarantine"]).read_bytes()
