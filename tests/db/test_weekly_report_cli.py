"""The weekly city report from the command line: a week is built once its seven orders dates
are settled, equals an independent sum of the daily gold files, waits (naming the dates) while
one is not, and is due again only when a daily result it was built from changed. Real runs of
the command line on generated partitions, on both warehouses."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from devtools.samples import generate_partition
from tests.conftest import Workspace, in_process_cli
from tests.db.conftest import lose_warehouse, warehouse_tables
from tests.weekly_sums import WEEK_HEADER, csv_rows, independent_week

ZONE = ZoneInfo("Asia/Jakarta")
WEEKS = [date(2026, 11, 2), date(2026, 11, 9), date(2026, 11, 16)]
MISSING = date(2026, 11, 19)  # no file: settled as missing once its wait window is over
CLOCK = datetime(2026, 11, 24, 10, 0, tzinfo=ZONE)  # every date's window is over
WEEKLY = ("--pipeline", "weekly_city_report")
#: what a test proves of the rules, not of the warehouse's sums, runs on SQLite alone
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"])


def dates(first: date = WEEKS[0], count: int = 21) -> list[date]:
    return [first + timedelta(days=n) for n in range(count)]


@pytest.fixture
def call(workspace: Workspace, monkeypatch, capsys):
    return in_process_cli(workspace, monkeypatch, capsys, CLOCK)


def write_days(ws: Workspace, days: list[date]) -> None:
    ws.raw.mkdir(parents=True, exist_ok=True)
    for day in days:
        if day != MISSING:
            generate_partition(ws.raw / f"pesanan_{day}.csv", day, 120, seed=7)


def run_orders(call, days: list[date], *extra: str) -> None:
    for day in days:
        code, _, err = call("run", "--date", day.isoformat(), *extra)
        assert code == (1 if day == MISSING else 0), err


def week_gold(ws: Workspace, week: date) -> list[list[str]]:
    rows = csv_rows(ws.gold / f"summary_mingguan_{week}.csv")
    assert rows[0] == WEEK_HEADER
    return rows[1:]


def week_entry(ws: Workspace, week: date) -> dict:
    state = json.loads((ws.state_dir / "weekly_city_report" / "state.json").read_text())
    return state["runs"][week.isoformat()]


def week_row(call, week: date, now: str = CLOCK.isoformat()) -> dict:
    code, out, err = call("status", *WEEKLY, "--json", "--now", now)
    assert code == 0, err
    return next(row for row in json.loads(out) if row["date"] == week.isoformat())


def due(call, now: str = CLOCK.isoformat()) -> list[str]:
    code, out, err = call("due", *WEEKLY, "--now", now)
    assert code == 0, err
    return out.split()


@pytest.fixture
def built(workspace: Workspace, call) -> Workspace:
    """Three weeks of orders processed and their weeks built."""
    ws = workspace
    write_days(ws, dates())
    run_orders(call, dates())
    assert due(call) == [week.isoformat() for week in WEEKS]
    for week in WEEKS:
        code, out, err = call("run", *WEEKLY, "--date", week.isoformat())
        assert code == 0, out + err
    return ws


def test_three_weeks_equal_an_independent_sum_of_the_daily_gold_files(built, call):
    ws = built
    for week in WEEKS:
        assert week_gold(ws, week) == independent_week(ws.gold, week)
        kota = [row[1] for row in week_gold(ws, week)]
        assert kota == sorted(kota)  # code-point order
    assert week_entry(ws, WEEKS[2])["rows"]["missing"] == 1
    assert week_entry(ws, WEEKS[2])["built_from"][MISSING.isoformat()] == {
        "checksum": None, "attempt": 0}  # a missing file is no attempt
    assert week_entry(ws, WEEKS[0])["rows"] == {"days": 7, "missing": 0,
                                                "kota": len(week_gold(ws, WEEKS[0]))}
    assert due(call) == []


@SQLITE_ONLY
def test_an_identical_forced_reprocess_of_a_day_rebuilds_nothing_and_says_so(built, call):
    ws = built
    before = (ws.gold / f"summary_mingguan_{WEEKS[0]}.csv").read_bytes()
    run_orders(call, [date(2026, 11, 4)], "--force")
    assert due(call) == []
    row = week_row(call, WEEKS[0])
    assert row["state"] == "done"
    assert "2026-11-04 reprocessed, unchanged" in row["reason"]
    code, out, _ = call("run", *WEEKLY, "--date", WEEKS[0].isoformat())
    assert code == 0 and "[skip]" in out
    assert (ws.gold / f"summary_mingguan_{WEEKS[0]}.csv").read_bytes() == before


def test_a_changed_day_makes_only_its_week_due_and_a_plain_run_rebuilds_it(built, call):
    ws = built
    changed = date(2026, 11, 11)
    path = ws.raw / f"pesanan_{changed}.csv"
    path.write_text("".join(path.read_text(encoding="utf-8").splitlines(True)[:60]),
                    encoding="utf-8")
    others = {week: (ws.gold / f"summary_mingguan_{week}.csv").read_bytes()
              for week in (WEEKS[0], WEEKS[2])}
    run_orders(call, [changed], "--force")

    assert due(call) == [WEEKS[1].isoformat()]
    row = week_row(call, WEEKS[1])
    assert row["state"] == "due" and row["label"] == "due (changed)"
    assert "2026-11-11 reprocessed, checksums changed" in row["reason"]
    code, out, err = call("run", *WEEKLY, "--date", WEEKS[1].isoformat())
    assert code == 0, out + err
    assert "2026-11-11 reprocessed, checksums changed" in out  # the gate's reason
    assert week_gold(ws, WEEKS[1]) == independent_week(ws.gold, WEEKS[1])
    assert week_entry(ws, WEEKS[1])["built_from"][changed.isoformat()]["attempt"] == 2
    for week, content in others.items():
        assert (ws.gold / f"summary_mingguan_{week}.csv").read_bytes() == content
    assert due(call) == []


@SQLITE_ONLY
def test_a_forced_rebuild_of_unchanged_inputs_is_byte_identical(built, call):
    ws = built
    gold = ws.gold / f"summary_mingguan_{WEEKS[1]}.csv"
    before, checksums = gold.read_bytes(), week_entry(ws, WEEKS[1])["checksums"]
    code, out, err = call("run", *WEEKLY, "--date", WEEKS[1].isoformat(), "--force")
    assert code == 0, out + err
    assert gold.read_bytes() == before
    assert week_entry(ws, WEEKS[1])["checksums"] == checksums
    assert week_entry(ws, WEEKS[1])["attempt"] == 2


@SQLITE_ONLY
def test_a_failed_then_blocked_date_holds_its_week_and_names_it(workspace, call):
    ws = workspace
    week = dates(WEEKS[0], 7)
    write_days(ws, week)
    bad = week[3]
    (ws.raw / f"pesanan_{bad}.csv").write_text("garbage\n", encoding="utf-8")
    run_orders(call, [day for day in week if day != bad])
    assert call("run", "--date", bad.isoformat())[0] == 1

    assert WEEKS[0].isoformat() not in due(call)
    row = week_row(call, WEEKS[0])
    assert row["state"] == "waiting" and row["label"] == "waiting for days"
    assert f"{bad} (failed 1/3)" in row["reason"]
    code, out, _ = call("run", *WEEKLY, "--date", WEEKS[0].isoformat())
    assert code == 1 and f"[waiting] {WEEKS[0]} waits for its orders dates" in out
    manifests = sorted((ws.state_dir / "weekly_city_report" / "runs").glob("run-*.json"))
    assert json.loads(manifests[-1].read_text())["status"] == "waiting"
    assert not (ws.gold / f"summary_mingguan_{WEEKS[0]}.csv").exists()

    for _ in range(2):
        assert call("run", "--date", bad.isoformat())[0] == 1
    assert f"{bad} (blocked 3/3)" in week_row(call, WEEKS[0])["reason"]
    code, out, _ = call("run", *WEEKLY, "--date", WEEKS[0].isoformat(), "--force")
    assert code == 1 and "[waiting]" in out  # even forced: never built from a failed day

    # fixed and unblocked: the week whose run gave up waiting is the sweep's to build
    from tokokita_etl.pipelines import by_name, settings_of
    from tokokita_etl.runner.propagation import sweep

    write_days(ws, [bad])
    assert call("run", "--date", bad.isoformat(), "--reset-attempts")[0] == 0
    weekly = by_name("weekly_city_report")
    [need] = sweep(weekly, settings_of(weekly, env=ws.env(), cwd=ws.root), CLOCK)
    assert need.key == WEEKS[0]
    assert need.reason.startswith("inputs settled after the run started ")
    assert need.reason.endswith(" gave up waiting for them")


@SQLITE_ONLY
def test_a_week_with_a_missing_file_waits_for_its_window_then_is_built(workspace, call):
    ws = workspace
    week = dates(WEEKS[1], 7)
    sunday = week[-1]
    write_days(ws, week[:-1])
    run_orders(call, week[:-1])
    # Sunday's orders run fires Monday 02:30 and waits six hours for its file
    inside = datetime(2026, 11, 16, 5, 0, tzinfo=ZONE).isoformat()
    after = datetime(2026, 11, 16, 9, 0, tzinfo=ZONE).isoformat()
    row = week_row(call, WEEKS[1], inside)
    assert row["state"] == "waiting" and f"{sunday} (waiting for file)" in row["reason"]
    assert WEEKS[1].isoformat() not in due(call, inside)
    assert WEEKS[1].isoformat() in due(call, after)
    # a week has no partition file: its own words, not the orders'
    assert week_row(call, WEEKS[1], after)["reason"].startswith("its inputs are settled: ")
    code, out, err = call("run", *WEEKLY, "--date", WEEKS[1].isoformat())
    assert code == 0, out + err
    assert week_entry(ws, WEEKS[1])["rows"]["missing"] == 1
    assert week_gold(ws, WEEKS[1]) == independent_week(ws.gold, WEEKS[1])


@SQLITE_ONLY
def test_a_date_that_is_not_a_monday_is_refused_naming_its_week(workspace, call):
    code, _, err = call("run", *WEEKLY, "--date", "2026-11-11")
    assert code == 2
    assert "2026-11-11 is not the first date of a weekly partition" in err
    assert "2026-11-09" in err


@SQLITE_ONLY
def test_the_sweep_lists_a_changed_week_once_until_it_is_rebuilt(built, call):
    from tokokita_etl.pipelines import by_name, settings_of
    from tokokita_etl.runner.propagation import sweep

    ws = built
    weekly = by_name("weekly_city_report")

    def needs():
        settings = settings_of(weekly, env=ws.env(), cwd=ws.root)
        return sweep(weekly, settings, CLOCK)

    assert needs() == []
    changed = date(2026, 11, 18)
    path = ws.raw / f"pesanan_{changed}.csv"
    path.write_text("".join(path.read_text(encoding="utf-8").splitlines(True)[:50]),
                    encoding="utf-8")
    run_orders(call, [changed], "--force")
    found = needs()
    assert [(n.key, n.reason) for n in found] == [
        (WEEKS[2], "2026-11-18 reprocessed, checksums changed")]
    assert needs()[0].run_id == found[0].run_id  # asked again: the same run
    assert call("run", *WEEKLY, "--date", WEEKS[2].isoformat())[0] == 0
    assert needs() == []


def one_error(err: str) -> str:
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    return line


def test_a_lost_warehouse_refuses_both_pipelines_and_one_reconcile_recovers_both(built, call):
    """Bug: after a lost warehouse, `state reconcile` reconciled the orders alone, `status
    --pipeline weekly_city_report` still exited 2 saying nothing of it, and the hint to reload
    a week (`tokokita-etl run --date D`) ran the orders."""
    ws = built
    gold = {week: week_gold(ws, week) for week in WEEKS}
    lose_warehouse(ws.warehouse_url)

    code, _, err = call("run", "--date", WEEKS[0].isoformat(), "--force")
    assert code == 2 and "`tokokita-etl state reconcile`" in one_error(err)
    code, _, err = call("run", *WEEKLY, "--date", WEEKS[0].isoformat(), "--force")
    assert code == 2 and "`tokokita-etl state reconcile`" in one_error(err)
    for pipeline in ((), WEEKLY):
        code, _, err = call("status", *pipeline)
        assert code == 2 and "`tokokita-etl state reconcile`" in one_error(err)
    assert warehouse_tables(ws.warehouse_url) == []  # nothing created by a refusal

    code, out, err = call("state", "reconcile")
    assert code == 0, err
    lines = out.splitlines()
    orders = [n for n, line in enumerate(lines) if line.startswith("[orders] ")]
    weekly = [n for n, line in enumerate(lines) if line.startswith("[weekly_city_report] ")]
    assert orders and weekly and max(orders) < min(weekly)  # upstream first
    assert "[orders] 0 done dates it holds as recorded stay done; 20 need a re-run" in out
    assert "[weekly_city_report] 0 done dates it holds as recorded stay done; 3 need a " \
           "re-run" in out
    for week in WEEKS:
        assert f"[weekly_city_report] needs re-run: {week}" in lines
    assert "`tokokita-etl run --pipeline weekly_city_report --date D`" in out
    assert "backfill of tokokita_weekly_city_report over 2026-11-02 .. 2026-11-16" in out
    assert "`tokokita-etl run --date D`" in out  # the orders' own hint

    for pipeline in ((), WEEKLY):
        code, _, err = call("status", *pipeline)
        assert code == 0, err
    run_orders(call, dates())
    assert due(call) == [week.isoformat() for week in WEEKS]
    row = week_row(call, WEEKS[0])
    assert row["state"] == "needs re-run"
    assert "next scheduled catch-up" not in row["reason"]
    assert f"trigger tokokita_weekly_city_report with partition key {WEEKS[0]}, or run " \
           f"`tokokita-etl run --pipeline weekly_city_report --date {WEEKS[0]}`" in row["reason"]
    for week in WEEKS:
        code, out, err = call("run", *WEEKLY, "--date", week.isoformat())
        assert code == 0, out + err
        assert week_gold(ws, week) == gold[week]
    assert due(call) == []


@SQLITE_ONLY
def test_the_weekly_report_creates_no_warehouse_the_orders_watermark_describes_otherwise(
        workspace, call):
    """Bug: with the warehouse lost and the weekly report's own watermark empty, its run
    created a new warehouse (a new identity), after which every orders run was refused as
    "another warehouse"."""
    ws = workspace
    week = dates(WEEKS[0], 7)
    write_days(ws, week)
    run_orders(call, week)
    lose_warehouse(ws.warehouse_url)

    code, out, err = call("run", *WEEKLY, "--date", WEEKS[0].isoformat())
    assert code == 2, out + err
    error = one_error(err)
    assert "it is missing or empty" in error and "`tokokita-etl state reconcile`" in error
    assert warehouse_tables(ws.warehouse_url) == []
    assert not (ws.state_dir / "weekly_city_report" / "state.json").exists() or \
        WEEKS[0].isoformat() not in week_state(ws)


@SQLITE_ONLY
def test_reconcile_of_one_named_pipeline_reconciles_that_one_alone(workspace, call):
    ws = workspace
    week = dates(WEEKS[0], 7)
    write_days(ws, week)
    run_orders(call, week[:2])
    lose_warehouse(ws.warehouse_url)

    code, out, err = call("state", "reconcile", *WEEKLY)
    assert code == 0, err
    assert all(line.startswith("[weekly_city_report] ") for line in out.splitlines())
    code, _, err = call("run", "--date", week[2].isoformat())
    assert code == 2 and "another warehouse" in one_error(err)  # the orders: not reconciled
    code, out, err = call("state", "reconcile", "--pipeline", "orders")
    assert code == 0, err
    assert "[orders] 0 done dates it holds as recorded stay done; 2 need a re-run" in out
    assert "[orders] reload them: `tokokita-etl run --date D`" in out
    assert call("run", "--date", week[2].isoformat())[0] == 0


def week_state(ws: Workspace) -> dict:
    return json.loads((ws.state_dir / "weekly_city_report" / "state.json").read_text())["runs"]
