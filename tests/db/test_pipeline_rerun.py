"""Re-runs: the skip path, --force giving identical results, manifests, re-load semantics,
parallel runs of different dates in real processes, and what is due after real runs."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from tests.conftest import (
    CLI,
    HEADER,
    SAMPLE_DATES,
    SAMPLE_RAW,
    Workspace,
    clean_env,
    read_csv_rows,
)
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.orders.schema import fact_rows, summary_rows
from tokokita_etl.runner.policy import due_runs
from tokokita_etl.runner.sequence import run_for_date
from tokokita_etl.runner.stores.files import StateStore
from tokokita_etl.warehouse.database import Warehouse

D02, D03, D04 = SAMPLE_DATES
JKT = ZoneInfo("Asia/Jakarta")


def run(ws: Workspace, day: date, **kwargs):
    lines: list[str] = []
    outcome = run_for_date(ORDERS, ws.settings(), day, log=lines.append, **kwargs)
    outcome.log = lines
    return outcome


def canonical(ws: Workspace, day: date) -> tuple[list, list]:
    wh = Warehouse(ws.warehouse_url, "Asia/Jakarta")
    with wh.begin() as conn:
        return list(fact_rows(wh, conn, day)), list(summary_rows(wh, conn, day))


def manifest(path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def test_second_run_of_a_succeeded_date_is_skipped_with_exit_0_and_a_skipped_manifest(
        sqlite_workspace):
    ws = sqlite_workspace
    ws.copy_samples(D02)
    first = run(ws, D02)
    assert first.status == "success"
    state_before = ws.state_file.read_bytes()
    gold = ws.gold_file(D02)
    gold_before = (gold.read_bytes(), gold.stat().st_mtime_ns)
    quarantine_before = ws.quarantine_file(D02).stat().st_mtime_ns

    second = run(ws, D02)
    assert (second.status, second.exit_code, second.attempt) == ("skipped", 0, 1)
    assert any(line.startswith("[skip]") and "force" in line for line in second.log)
    assert ws.state_file.read_bytes() == state_before  # attempt unchanged, nothing rewritten
    assert (gold.read_bytes(), gold.stat().st_mtime_ns) == gold_before
    assert ws.quarantine_file(D02).stat().st_mtime_ns == quarantine_before

    manifests = ws.manifests(D02)
    assert len(manifests) == 2
    skipped = manifest(second.manifest)
    entry = StateStore(ws.state_file, "orders").read().entry(D02)
    assert (skipped["status"], skipped["attempt"], skipped["exit_code"]) == ("skipped", 1, 0)
    assert skipped["checksums"] == entry["checksums"]
    assert skipped["rows"] == entry["rows"]
    assert skipped["stages_ms"] == {}


def test_force_reprocesses_with_identical_checksums_and_outputs_and_attempt_plus_one(workspace):
    workspace.copy_samples()
    for day in (D02, D03):
        run(workspace, day)
    before = StateStore(workspace.state_file, "orders").read().entry(D03)
    gold_before = workspace.gold_file(D03).read_bytes()
    quarantine_before = workspace.quarantine_file(D03).read_bytes()
    rows_before = canonical(workspace, D03)

    skipped = run(workspace, D03)
    forced = run(workspace, D03, force=True)
    assert (skipped.status, skipped.attempt) == ("skipped", 1)
    assert (forced.status, forced.exit_code, forced.attempt) == ("success", 0, 2)
    after = StateStore(workspace.state_file, "orders").read().entry(D03)
    assert after["attempt"] == 2
    assert after["checksums"] == before["checksums"]
    assert after["rows"] == before["rows"]
    assert workspace.gold_file(D03).read_bytes() == gold_before
    assert workspace.quarantine_file(D03).read_bytes() == quarantine_before
    assert canonical(workspace, D03) == rows_before

    bodies = sorted((manifest(p) for p in workspace.manifests(D03)),
                    key=lambda b: (b["attempt"], b["status"] != "success"))
    assert [(b["status"], b["attempt"]) for b in bodies] == [
        ("success", 1), ("skipped", 1), ("success", 2)]
    assert len({json.dumps(b["checksums"], sort_keys=True) for b in bodies}) == 1


def test_manifests_are_never_overwritten_even_for_runs_started_in_the_same_second(sqlite_workspace):
    ws = sqlite_workspace
    ws.copy_samples(D02)
    fixed = datetime(2026, 11, 3, 19, 30, 5, tzinfo=UTC)
    ws.runs.mkdir(parents=True)
    occupied = ws.runs / "run-2026-11-02-193005.json"
    occupied.write_text("someone else's manifest\n")

    outcomes = [run(ws, D02, now=lambda: fixed),
                run(ws, D02, now=lambda: fixed),
                run(ws, D02, now=lambda: fixed, force=True)]
    assert [o.status for o in outcomes] == ["success", "skipped", "success"]
    assert occupied.read_text() == "someone else's manifest\n"
    names = [Path(o.manifest).name for o in outcomes]
    assert names == ["run-2026-11-02-193005-2.json", "run-2026-11-02-193005-3.json",
                     "run-2026-11-02-193005-4.json"]
    assert [manifest(o.manifest)["status"] for o in outcomes] == ["success", "skipped", "success"]
    assert len(ws.manifests(D02)) == 4
    assert ws.leftovers() == []


def test_force_after_editing_a_partition_makes_its_fact_rows_exactly_the_new_partition(workspace):
    workspace.copy_samples(D02, D03)
    run(workspace, D02)
    run(workspace, D03)
    other_day_before = canonical(workspace, D03)
    other_state_before = StateStore(workspace.state_file, "orders").read().entry(D03)

    lines = (SAMPLE_RAW / "pesanan_2026-11-02.csv").read_text().splitlines()
    edited = [line for line in lines if not line.startswith("TK-20261102-0008,")]
    edited = [line.replace("CUST-10231,Jakarta Selatan,Sepatu Lari,1,450000,90000",
                           "CUST-10231,  bandung ,Sepatu Lari,2,450000,100000")
              if line.startswith("TK-20261102-0001,") else line for line in edited]
    assert len(edited) == len(lines) - 1
    workspace.write_partition(D02, "\n".join(edited) + "\n")

    outcome = run(workspace, D02, force=True)
    assert (outcome.status, outcome.attempt) == ("success", 2), outcome.log
    assert any("(1 removed" in line for line in outcome.log)
    fact, summary = canonical(workspace, D02)
    assert [r[0] for r in fact] == [f"TK-20261102-000{i}" for i in range(1, 8)]
    changed = fact[0]
    assert changed[4:] == ["Bandung", "Sepatu Lari", 2, "450000.00", "100000.00", "900000.00",
                           "800000.00"]
    wh = Warehouse(workspace.warehouse_url, "Asia/Jakarta")
    with wh.begin() as conn:
        from sqlalchemy import text

        gone = conn.execute(text("SELECT COUNT(*) FROM fact_pesanan WHERE order_id = :i"),
                            {"i": "TK-20261102-0008"}).scalar()
    assert gone == 0
    assert summary == [
        ["2026-11-02", "Bandung", 3, 8, "1710000.00", "1529000.00"],
        ["2026-11-02", "Jakarta Selatan", 1, 3, "267000.00", "267000.00"],
        ["2026-11-02", "Medan", 1, 1, "329000.00", "289000.00"],
        ["2026-11-02", "Surabaya", 2, 2, "1448000.00", "1238000.00"],
    ]
    assert outcome.entry["rows"] == {"extracted": 7, "karantina": 0, "duplikat": 0, "fact": 7,
                                     "summary": 4}
    gold = read_csv_rows(workspace.gold_file(D02))
    assert [(g["kota"], g["jumlah_pesanan"], g["bruto"]) for g in gold] == [
        (s[1], str(s[2]), s[4]) for s in summary]
    # the other date is untouched
    assert canonical(workspace, D03) == other_day_before
    assert StateStore(workspace.state_file, "orders").read().entry(D03) == other_state_before


def test_force_with_a_header_only_partition_removes_every_row_of_that_date(workspace):
    workspace.copy_samples(D02)
    run(workspace, D02)
    workspace.write_partition(D02, HEADER + "\n")
    outcome = run(workspace, D02, force=True)
    assert outcome.status == "success", outcome.log
    assert canonical(workspace, D02) == ([], [])
    assert workspace.gold_file(D02).read_text() == \
        "order_date,kota,jumlah_pesanan,total_qty,bruto,bersih\n"


def test_parallel_cli_runs_of_different_dates_all_land_and_same_date_runs_never_interleave(
        sqlite_workspace, tmp_path):
    ws = sqlite_workspace
    ws.copy_samples(D02, D03)
    env = clean_env(**ws.env())
    procs = [subprocess.Popen([str(CLI), "run", "--date", day.isoformat()], cwd=ws.root, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for day in (D02, D03, D02)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        results.append((proc.returncode, out + err))
    (rc_a, out_a), (rc03, out03), (rc_b, out_b) = results
    assert rc03 == 0, out03
    # two runs of 2026-11-02: one succeeds; the other waited its turn (a skip or a full re-run)
    # or refused with a clear message, never interleaving with it
    assert 0 in (rc_a, rc_b), out_a + out_b
    for rc, out in ((rc_a, out_a), (rc_b, out_b)):
        if rc == 0:
            assert "status=skipped" in out or "status=success" in out, out
        else:
            assert rc == 1, out
            assert "is being processed by" in out, out
    assert "status=success" in out_a + out_b

    state = StateStore(ws.state_file, "orders").read()
    assert state.has_success(D02)
    assert state.has_success(D03)
    assert state.attempts(D03) == 1
    assert state.attempts(D02) in (1, 2)

    reference = Workspace(tmp_path / "sequential", f"sqlite:///{tmp_path / 'sequential' / 'wh.db'}")
    reference.copy_samples(D02, D03)
    for day in (D02, D03):
        run(reference, day)
        assert canonical(ws, day) == canonical(reference, day)
        assert state.entry(day)["checksums"] == \
            StateStore(reference.state_file, "orders").read().entry(day)["checksums"]
    assert ws.leftovers() == []
    assert not any((ws.state_dir / "claims").glob("*.json"))


# -- due_runs after real runs (the sample-week scenarios of tests/pure/test_schedule.py) ----

def test_reference_scenarios_hold_after_real_pipeline_runs(sqlite_workspace):
    ws = sqlite_workspace
    ws.copy_samples()
    settings_ = ws.settings()
    state = StateStore(settings_.state_file, "orders")
    nov5, nov6 = datetime(2026, 11, 5, 2, 30, tzinfo=JKT), datetime(2026, 11, 6, 2, 30, tzinfo=JKT)
    assert due_runs(state.read(), nov5, ORDERS.raw.present(settings_), 7, 3,
                    tz="Asia/Jakarta") == [D02, D03, D04]
    for day in (D02, D03):
        assert run_for_date(ORDERS, settings_, day, log=lambda _: None).status == "success"
    assert due_runs(state.read(), nov6, ORDERS.raw.present(settings_), 7, 3,
                    tz="Asia/Jakarta") == [D04]
    assert run_for_date(ORDERS, settings_, D04, log=lambda _: None).status == "success"
    assert due_runs(state.read(), nov6, ORDERS.raw.present(settings_), 7, 3,
                    tz="Asia/Jakarta") == []
