"""Validate on SQLite and PostgreSQL: the three checks, the staged gold file and the checksums."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.conftest import SAMPLE_DATES, Workspace
from tokokita_etl.errors import ValidationError
from tokokita_etl.orders.extract import extract
from tokokita_etl.orders.gold import staged_gold_path
from tokokita_etl.orders.load import load
from tokokita_etl.orders.transform import transform
from tokokita_etl.orders.validate import source_counts, validate
from tokokita_etl.warehouse.database import Warehouse

D02, D03, D04 = SAMPLE_DATES

#: the checksums of the sample partitions (docs/data-contract.md gives 2026-11-02's): any
#: change to the canonical lines, on either backend, changes them
SAMPLE_CHECKSUMS = {
    D02: ("a7f08411e7ea6853119483b7215f3b57d95d7924d76163f3bd9fd68dcd47bdf1",
          "e6d7377fdc1891de39a8a00c7c7e9008597b91b2b986ba6242307744d44af665"),
    D03: ("ba289a9773a6b3ceee2d31bdb250fe5d5c8e7e033f702bdff2ec04a112f8960b",
          "6d6bf30dbfa06de3ead0081ef72b597d28c0f0f6e8606acc5437e28ad3124426"),
    D04: ("eefcedfd002f4a65bc927cec24e974a6e3ae6a8bd4791eb61e2f15e3158da125",
          "573e3b0e018cea4f60d62101e417f9d9c8edcedc0f2949a6f0db2340f9d133f7"),
}


def loaded(ws: Workspace, day: date) -> tuple[Path, list[int]]:
    """Extract, transform and load sample `day`: its staging folder and the conflict lines."""
    staging = ws.staging / day.isoformat()
    extract(ws.raw, day, staging)
    transform(day, staging, tz="Asia/Jakarta")
    result = load(Warehouse(ws.warehouse_url, "Asia/Jakarta"), day, staging, ws.quarantine_file(day))
    return staging, [c["line"] for c in result.conflicts]


def validated(ws: Workspace, day: date):
    staging, excluded = loaded(ws, day)
    return validate(Warehouse(ws.warehouse_url, "Asia/Jakarta"), day, staging, ws.gold, excluded)


def execute(ws: Workspace, sql: str, day: date) -> None:
    warehouse = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    with warehouse.begin() as conn:
        conn.execute(text(sql), {"d": warehouse.day_param(day)})


def test_the_sample_partitions_pass_with_their_documented_checksums(workspace):
    workspace.copy_samples()
    for day in SAMPLE_DATES:
        result = validated(workspace, day)
        assert result.ok, result.checks
        assert [c.name for c in result.checks] == ["reconcile kota", "daily aggregates",
                                                   "gold csv"]
        fact, summary = SAMPLE_CHECKSUMS[day]
        assert result.checksums == {f"fact_{day}": fact, f"summary_{day}": summary}
    first = validated(workspace, D02)  # again: the same checksums
    assert first.checksums[f"fact_{D02}"] == SAMPLE_CHECKSUMS[D02][0]
    assert (first.fact_rows, first.summary_rows, first.bruto, first.bersih) == (
        8, 4, "3542000.00", "3092000.00")
    assert first.source_per_kota == {"Jakarta Selatan": 2, "Bandung": 2, "Surabaya": 2,
                                     "Medan": 2}


def test_the_checked_gold_file_is_staged_beside_the_published_name(workspace):
    workspace.copy_samples(D02)
    result = validated(workspace, D02)
    staged = Path(result.staged_gold)
    assert staged == staged_gold_path(workspace.gold, D02)
    assert staged.parent == workspace.gold_file(D02).parent
    assert staged.name == f".staged-{workspace.gold_file(D02).name}"
    assert staged.read_text(encoding="utf-8").splitlines()[:2] == [
        "order_date,kota,jumlah_pesanan,total_qty,bruto,bersih",
        "2026-11-02,Bandung,2,6,810000.00,729000.00"]
    assert not workspace.gold_file(D02).exists()  # publishing is a later stage


def test_a_summary_that_disagrees_with_the_facts_fails_and_leaves_no_gold(workspace):
    workspace.copy_samples(D02)
    staging, excluded = loaded(workspace, D02)
    execute(workspace, "UPDATE summary_harian SET jumlah_pesanan = jumlah_pesanan + 1 "
                       "WHERE order_date = :d AND kota = 'Medan'", D02)
    with pytest.raises(ValidationError) as err:
        validate(Warehouse(workspace.warehouse_url, "Asia/Jakarta"), D02, staging, workspace.gold, excluded)
    assert "daily aggregates" in str(err.value)
    assert "reconcile kota" not in str(err.value)
    assert not staged_gold_path(workspace.gold, D02).exists()


def test_facts_that_differ_from_the_source_per_kota_fail_naming_the_kota(workspace):
    workspace.copy_samples(D02)
    staging, excluded = loaded(workspace, D02)
    execute(workspace, "DELETE FROM fact_pesanan WHERE order_date = :d "
                       "AND order_id = 'TK-20261102-0005'", D02)
    with pytest.raises(ValidationError) as err:
        validate(Warehouse(workspace.warehouse_url, "Asia/Jakarta"), D02, staging, workspace.gold, excluded)
    assert "per-kota counts differ: Medan: source 2 vs fact 1" in str(err.value)


def test_source_counts_leave_out_the_lines_the_load_quarantined(sqlite_workspace):
    sqlite_workspace.copy_samples(D02)
    staging, _ = loaded(sqlite_workspace, D02)
    assert source_counts(staging, []) == {"Jakarta Selatan": 2, "Bandung": 2, "Surabaya": 2,
                                          "Medan": 2}
    assert source_counts(staging, [6])["Medan"] == 1  # lines 6 and 9 are Medan's
    assert "Medan" not in source_counts(staging, [6, 9])
