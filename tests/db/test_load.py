"""Load on SQLite and PostgreSQL: one transaction per date that merges the facts, removes
vanished rows, writes the summary and the quarantine (table and file)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.conftest import SAMPLE_DATES, Workspace, csv_text, read_csv_rows
from tokokita_etl.orders import load as load_module
from tokokita_etl.orders.contract import (
    BAD_QTY,
    DUPLICATE,
    MISSING_ORDER_ID,
    OTHER_PARTITION,
    QUARANTINE_COLUMNS,
    REJECTED_ROWS,
)
from tokokita_etl.orders.extract import extract
from tokokita_etl.orders.load import load
from tokokita_etl.orders.schema import fact_rows, summary_rows
from tokokita_etl.orders.transform import transform
from tokokita_etl.warehouse.database import Warehouse

D02 = SAMPLE_DATES[0]
D1, D2 = date(2026, 11, 10), date(2026, 11, 11)


def order(order_id: str, day: date, *, kota: str = "Medan", qty: str = "1",
          harga: str = "1000") -> list[str]:
    return [order_id, f"{day.isoformat()} 10:00:00", "C1", kota, "Teh", qty, harga, ""]


def staged(ws: Workspace, day: date) -> Path:
    """Extract and transform partition `day` of the workspace; the staging folder."""
    staging = ws.staging / day.isoformat()
    extract(ws.raw, day, staging)
    transform(day, staging, tz="Asia/Jakarta")
    return staging


def load_day(ws: Workspace, day: date):
    return load(Warehouse(ws.warehouse_url, "Asia/Jakarta"), day, staged(ws, day), ws.quarantine_file(day))


def facts(ws: Workspace, day: date) -> list[tuple]:
    """(order_id, kota, qty) of the fact rows of `day`."""
    warehouse = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    with warehouse.begin() as conn:
        return [(r[0], r[4], r[6]) for r in fact_rows(warehouse, conn, day)]


def summary(ws: Workspace, day: date) -> list[list]:
    warehouse = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    with warehouse.begin() as conn:
        return list(summary_rows(warehouse, conn, day))


def karantina(ws: Workspace, day: date) -> list[tuple]:
    """(line, reason, order_id) of the karantina table rows of `day`."""
    warehouse = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    with warehouse.begin() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT line, reason, order_id FROM karantina WHERE order_date = :d ORDER BY line"),
            {"d": warehouse.day_param(day)})]


def test_a_clean_partition_loads_its_facts_and_summary_and_an_empty_quarantine(workspace):
    workspace.copy_samples(D02)
    result = load_day(workspace, D02)
    assert (result.fact, result.summary, result.karantina, result.removed, result.conflicts) == (
        8, 4, 0, 0, [])
    assert len(facts(workspace, D02)) == 8
    assert summary(workspace, D02) == [
        ["2026-11-02", "Bandung", 2, 6, "810000.00", "729000.00"],
        ["2026-11-02", "Jakarta Selatan", 2, 4, "717000.00", "627000.00"],
        ["2026-11-02", "Medan", 2, 3, "567000.00", "498000.00"],
        ["2026-11-02", "Surabaya", 2, 2, "1448000.00", "1238000.00"],
    ]
    assert workspace.quarantine_file(D02).read_text(encoding="utf-8") == \
        ",".join(QUARANTINE_COLUMNS) + "\n"
    assert karantina(workspace, D02) == []


def test_rejected_rows_go_to_the_karantina_table_and_file_with_the_contract_reasons(workspace):
    workspace.write_partition(D1, csv_text([
        order("TK-1", D1), order("", D1), order("TK-2", D1, qty="0"), order("TK-1", D1, qty="2"),
    ]))
    result = load_day(workspace, D1)
    expected = [(2, DUPLICATE, "TK-1"), (3, MISSING_ORDER_ID, ""), (4, BAD_QTY, "TK-2")]
    assert (result.fact, result.karantina) == (1, 3)
    assert karantina(workspace, D1) == expected
    assert [(int(r["line"]), r["reason"], r["order_id"])
            for r in read_csv_rows(workspace.quarantine_file(D1))] == expected
    assert facts(workspace, D1) == [("TK-1", "Medan", 2)]  # the last record of TK-1 wins


def test_an_order_id_already_in_another_date_is_quarantined_and_left_where_it_is(workspace):
    workspace.write_partition(D1, csv_text([order("TK-A", D1, kota="Bandung")]))
    workspace.write_partition(D2, csv_text([order("TK-B", D2), order("TK-A", D2)]))
    load_day(workspace, D1)
    result = load_day(workspace, D2)
    assert result.conflicts == [{"line": 3, "order_id": "TK-A", "kota": "Medan",
                                 "other_date": D1.isoformat()}]
    assert facts(workspace, D1) == [("TK-A", "Bandung", 1)]
    assert facts(workspace, D2) == [("TK-B", "Medan", 1)]
    assert [row[1:4] for row in summary(workspace, D2)] == [["Medan", 1, 1]]
    assert karantina(workspace, D2) == [(3, OTHER_PARTITION, "TK-A")]
    assert read_csv_rows(workspace.quarantine_file(D2))[0]["reason"] == OTHER_PARTITION


@pytest.mark.parametrize("conflict_at", [0, 6])
def test_a_new_dates_copy_that_meets_another_dates_order_id_is_undone_before_the_keys_are_staged(
        workspace, monkeypatch, conflict_at):
    """A new date's rows go straight into the fact table (PostgreSQL); an order_id of
    another date makes that copy fail in its first or its last batch, after other batches
    were written: none of them stays, and the date loads less the conflict."""
    monkeypatch.setattr(load_module, "BATCH_ROWS", 2)
    workspace.write_partition(D1, csv_text([order("TK-Z", D1, kota="Bandung")]))
    rows = [order(f"TK-{n}", D2) for n in range(6)]
    rows.insert(conflict_at, order("TK-Z", D2))
    workspace.write_partition(D2, csv_text(rows))
    load_day(workspace, D1)
    result = load_day(workspace, D2)
    assert result.conflicts == [{"line": conflict_at + 2, "order_id": "TK-Z", "kota": "Medan",
                                 "other_date": D1.isoformat()}]
    assert (result.fact, result.karantina) == (6, 1)
    assert facts(workspace, D2) == [(f"TK-{n}", "Medan", 1) for n in range(6)]
    assert facts(workspace, D1) == [("TK-Z", "Bandung", 1)]
    assert [row[1:4] for row in summary(workspace, D2)] == [["Medan", 6, 6]]
    assert karantina(workspace, D2) == [(conflict_at + 2, OTHER_PARTITION, "TK-Z")]


def test_loading_a_date_again_merges_changed_rows_and_removes_vanished_ones(workspace):
    workspace.write_partition(D1, csv_text([order("TK-A", D1), order("TK-B", D1),
                                            order("TK-C", D1, kota="Bandung")]))
    first = load_day(workspace, D1)
    workspace.write_partition(D1, csv_text([order("TK-A", D1, qty="5"),
                                            order("TK-C", D1, kota="Bandung")]))
    again = load_day(workspace, D1)
    assert (first.fact, first.removed, again.fact, again.removed) == (3, 0, 2, 1)
    assert facts(workspace, D1) == [("TK-A", "Medan", 5), ("TK-C", "Bandung", 1)]
    assert [row[1:4] for row in summary(workspace, D1)] == [["Bandung", 1, 1], ["Medan", 1, 5]]


def test_a_failed_load_changes_nothing_and_publishes_no_quarantine_file(workspace):
    workspace.write_partition(D1, csv_text([order("TK-A", D1)]))
    staging = staged(workspace, D1)
    (staging / REJECTED_ROWS).unlink()
    with pytest.raises(OSError):
        load(Warehouse(workspace.warehouse_url, "Asia/Jakarta"), D1, staging, workspace.quarantine_file(D1))
    assert facts(workspace, D1) == []
    assert summary(workspace, D1) == []
    assert not workspace.quarantine_file(D1).exists()
    assert workspace.leftovers() == []


def test_a_folder_where_the_quarantine_file_goes_fails_the_load_before_the_warehouse_changes(
        workspace):
    """Regression: the quarantine file is renamed into place after the commit, so a folder
    in its way failed the load with the date's rows already committed."""
    workspace.write_partition(D2, csv_text([order("TK-B", D2)]))
    load_day(workspace, D2)  # the warehouse's tables exist
    workspace.write_partition(D1, csv_text([order("TK-A", D1)]))
    staging = staged(workspace, D1)
    workspace.quarantine_file(D1).mkdir(parents=True)
    with pytest.raises(IsADirectoryError, match=r"karantina_2026-11-10\.csv"):
        load(Warehouse(workspace.warehouse_url, "Asia/Jakarta"), D1, staging,
             workspace.quarantine_file(D1))
    assert facts(workspace, D1) == []
    assert summary(workspace, D1) == []
    assert karantina(workspace, D1) == []


def test_an_offset_with_seconds_reaches_the_warehouse_as_the_same_instant(workspace):
    """Regression: Jakarta's offset before 1924 (+07:07:12) was written +07:07, so the fact
    row's time stamp named an instant 12 seconds away; PostgreSQL's binary COPY could not
    read the offset with its seconds."""
    day = date(1920, 6, 1)
    workspace.write_partition(day, csv_text([
        order("TK-A", day), ["TK-B", "1920-06-01T03:00:00Z", "C1", "Medan", "Teh", "1", "1000", ""]]))
    load_day(workspace, day)
    warehouse = Warehouse(workspace.warehouse_url, "Asia/Jakarta")
    with warehouse.begin() as conn:
        stamps = [row[2] for row in fact_rows(warehouse, conn, day)]
    assert stamps == ["1920-06-01T10:00:00+07:07:12", "1920-06-01T10:07:12+07:07:12"]
