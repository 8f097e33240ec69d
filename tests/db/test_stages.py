"""The stage registry (tokokita_etl.orders.stages): staged records, missing inputs, and rebuilding
them, on a real SQLite warehouse with a sample partition."""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime

import pyarrow.parquet as pq
import pytest

from tests.conftest import SAMPLE_DATES, Workspace, in_process_cli
from tokokita_etl.errors import EtlError
from tokokita_etl.orders.contract import VALID_ROWS
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.schema import fact_rows, summary_rows
from tokokita_etl.runner.staging import (
    missing_inputs,
    read_stage,
    run_stage,
    stage_durations,
    stage_file,
)
from tokokita_etl.warehouse.database import Warehouse

D03 = SAMPLE_DATES[1]  # quarantined rows and duplicates: the interesting sample


def warehouse_rows(ws: Workspace, day: date) -> tuple[list, list]:
    wh = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    with wh.begin() as conn:
        return list(fact_rows(wh, conn, day)), list(summary_rows(wh, conn, day))


def without_duration(result: dict) -> dict:
    """A stage record without what differs between two runs of it: its duration, and the
    warehouse revision a load reached (each load counts one)."""
    return {key: value for key, value in result.items() if key not in ("duration_ms", "warehouse")}


def test_the_stage_order_is_extract_transform_load_validate_publish_gold():
    assert ORDERS.stage_names == ("extract", "transform", "load", "validate", "publish_gold")


def test_an_unknown_stage_is_a_value_error_naming_the_stages(sqlite_workspace):
    with pytest.raises(ValueError, match="unknown stage 'loda'; stages: extract, transform"):
        run_stage(ORDERS, sqlite_workspace.settings(), D03, "loda")


def test_reading_the_record_of_a_stage_that_has_not_run_names_the_stage_and_date(sqlite_workspace):
    with pytest.raises(EtlError, match=r"stage 'transform' has not run for 2026-11-03"):
        read_stage(sqlite_workspace.settings(), D03, "transform")


def test_missing_inputs_are_the_upstream_stages_from_the_first_one_without_a_record(
        sqlite_workspace):
    ws = sqlite_workspace
    ws.copy_samples(D03)
    settings = ws.settings()
    assert missing_inputs(ORDERS, settings, D03, "extract") == []
    assert missing_inputs(ORDERS, settings, D03, "load") == ["extract", "transform"]
    assert missing_inputs(ORDERS, settings, D03, "publish_gold") == [
        "extract", "transform", "load", "validate"]

    run_stage(ORDERS, settings, D03, "extract")
    run_stage(ORDERS, settings, D03, "transform")
    assert missing_inputs(ORDERS, settings, D03, "transform") == []
    assert missing_inputs(ORDERS, settings, D03, "load") == []
    assert missing_inputs(ORDERS, settings, D03, "validate") == ["load"]

    # a gap early in the chain re-runs everything after it, even stages with a record
    stage_file(settings, D03, "extract").unlink()
    assert missing_inputs(ORDERS, settings, D03, "load") == ["extract", "transform"]
    assert missing_inputs(ORDERS, settings, D03, "validate") == ["extract", "transform", "load"]


def test_a_stage_records_its_output_and_duration_in_the_staging_folder(sqlite_workspace):
    ws = sqlite_workspace
    ws.copy_samples(D03)
    settings = ws.settings()
    result, lines = run_stage(ORDERS, settings, D03, "extract")
    assert read_stage(settings, D03, "extract") == result
    assert result["rows"] == 36
    assert lines[0].startswith("[extract] pesanan_2026-11-03.csv: 36 rows")
    assert stage_durations(ORDERS, settings, D03) == {"extract": result["duration_ms"]}


def test_load_after_its_staging_folder_was_removed_fails_and_rebuilding_the_inputs_gives_the_same_output(
        sqlite_workspace):
    ws = sqlite_workspace
    ws.copy_samples(D03)
    settings = ws.settings()
    for stage in ("extract", "transform"):
        run_stage(ORDERS, settings, D03, stage)
    staging = settings.staging_path(D03)
    valid_before = pq.read_table(staging / VALID_ROWS)
    loaded, _ = run_stage(ORDERS, settings, D03, "load")
    rows_before = warehouse_rows(ws, D03)
    quarantine_before = ws.quarantine_file(D03).read_bytes()
    assert len(rows_before[0]) == 10  # data/raw/EXPECTED.md: 10 fact rows

    shutil.rmtree(staging)
    with pytest.raises(FileNotFoundError):
        run_stage(ORDERS, settings, D03, "load")
    assert warehouse_rows(ws, D03) == rows_before  # nothing half-loaded
    assert ws.quarantine_file(D03).read_bytes() == quarantine_before

    rebuild = missing_inputs(ORDERS, settings, D03, "load")
    assert rebuild == ["extract", "transform"]
    for stage in [*rebuild, "load"]:
        run_stage(ORDERS, settings, D03, stage)
    assert pq.read_table(staging / VALID_ROWS).equals(valid_before)
    assert without_duration(read_stage(settings, D03, "load")) == without_duration(loaded)
    assert warehouse_rows(ws, D03) == rows_before
    assert ws.quarantine_file(D03).read_bytes() == quarantine_before
    assert missing_inputs(ORDERS, settings, D03, "validate") == []


def test_a_file_where_the_dates_staging_folder_goes_fails_the_run_with_one_error(
        sqlite_workspace, monkeypatch, capsys):
    """Regression: with a file in the place of the date's staging folder, extract failed and
    then dropping its staged files raised NotADirectoryError, a traceback instead of the
    run's one-line error."""
    ws = sqlite_workspace
    day = SAMPLE_DATES[0]
    ws.copy_samples(day)
    ws.staging.mkdir(parents=True)
    (ws.staging / day.isoformat()).write_text("not a folder\n")
    call = in_process_cli(ws, monkeypatch, capsys, datetime(2026, 11, 4, 19, 30, tzinfo=UTC))
    code, _, err = call("run", "--date", day.isoformat())
    assert code == 1, err
    assert "extract" in err and str(ws.staging / day.isoformat()) in err
    assert not ws.gold_file(day).exists()
