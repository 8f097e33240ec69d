"""The monthly city report from the command line, and a correction propagating day -> week ->
month: two months of orders, each month equal to an independent sum of its daily gold files;
a late correction of one day (`on_raw_change: reprocess`) rebuilds that day, its week and its
month and nothing else; an identical forced re-run of a day rebuilds nothing. Real runs of the
command line on generated partitions, on both warehouses."""

from __future__ import annotations

import calendar
import json
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from devtools.samples import generate_partition
from tests.conftest import Workspace, in_process_cli
from tests.weekly_sums import csv_rows, independent_sum, independent_week

ZONE = ZoneInfo("Asia/Jakarta")
OCTOBER, NOVEMBER = date(2026, 10, 1), date(2026, 11, 1)
#: the dates with a file; every other date of the two months is settled as missing. The week of
#: 2026-10-26 spans both months
FILED = [date(2026, 10, d) for d in (1, 5, 14, 26, 27, 31)] + \
        [date(2026, 11, d) for d in (1, 2, 3, 4, 16, 29)]
CLOCK = datetime(2026, 12, 3, 10, 0, tzinfo=ZONE)  # every wait window of both months is over
#: the catch-up windows that hold both months (the first fire of each grain after 10-01)
SETTINGS = {"TOKOKITA_START_DATE": "2026-10-01", "TOKOKITA_LOOKBACK_DAYS": "70",
            "TOKOKITA_ON_RAW_CHANGE": "reprocess",
            "TOKOKITA_WEEKLY_CITY_REPORT__START_DATE": "2026-10-12",
            "TOKOKITA_WEEKLY_CITY_REPORT__LOOKBACK_DAYS": "70",
            "TOKOKITA_MONTHLY_CITY_REPORT__START_DATE": "2026-11-01"}
WEEKLY = ("--pipeline", "weekly_city_report")
MONTHLY = ("--pipeline", "monthly_city_report")
MONTH_HEADER = ["month_start", "kota", "hari_aktif", "jumlah_pesanan", "total_qty", "bruto",
                "bersih"]


def month_days(first: date) -> list[date]:
    return [first + timedelta(days=n) for n in range(calendar.monthrange(first.year,
                                                                          first.month)[1])]


@pytest.fixture
def call(workspace: Workspace, monkeypatch, capsys):
    invoke = in_process_cli(workspace, monkeypatch, capsys, CLOCK)
    return lambda *args, **env: invoke(*args, **{**SETTINGS, **env})


def due(call, pipeline: tuple[str, str]) -> list[str]:
    code, out, err = call("due", *pipeline, "--now", CLOCK.isoformat())
    assert code == 0, err
    return out.split()


def run_all(call, pipeline: tuple[str, ...], keys: list[str], *extra: str) -> None:
    for key in keys:
        code, out, err = call("run", *pipeline, "--date", key, *extra)
        assert code == 0, out + err


def gold(ws: Workspace, name: str) -> bytes:
    return (ws.gold / name).read_bytes()


def month_gold(ws: Workspace, first: date) -> list[list[str]]:
    rows = csv_rows(ws.gold / f"summary_bulanan_{first}.csv")
    assert rows[0] == MONTH_HEADER
    return rows[1:]


def attempts(ws: Workspace, pipeline: str | None = None) -> dict[str, int]:
    folder = ws.state_dir / pipeline if pipeline else ws.state_dir
    runs = json.loads((folder / "state.json").read_text())["runs"]
    return {key: entry["attempt"] for key, entry in runs.items()}


@pytest.fixture
def built(workspace: Workspace, call) -> Workspace:
    """Both months of orders processed, their weeks and months built."""
    ws = workspace
    ws.raw.mkdir(parents=True, exist_ok=True)
    for day in FILED:
        generate_partition(ws.raw / f"pesanan_{day}.csv", day, 40, seed=11)
    run_all(call, (), [day.isoformat() for day in FILED])
    weeks = due(call, WEEKLY)
    # the weeks of 2026-10-19 and 2026-11-09 have no file at all: no input, nothing to build
    assert weeks == ["2026-10-05", "2026-10-12", "2026-10-26", "2026-11-02", "2026-11-16",
                     "2026-11-23"]
    run_all(call, WEEKLY, weeks)
    assert due(call, MONTHLY) == [OCTOBER.isoformat(), NOVEMBER.isoformat()]
    run_all(call, MONTHLY, [OCTOBER.isoformat(), NOVEMBER.isoformat()])
    return ws


def test_each_month_equals_an_independent_sum_of_its_daily_gold_files(built, call):
    ws = built
    for first in (OCTOBER, NOVEMBER):
        assert month_gold(ws, first) == independent_sum(ws.gold, first, month_days(first))
    october = json.loads((ws.state_dir / "monthly_city_report" / "state.json").read_text())[
        "runs"][OCTOBER.isoformat()]
    assert october["rows"]["days"] == 6 and october["rows"]["missing"] == 25
    assert sorted(october["built_from"]) == [day.isoformat() for day in month_days(OCTOBER)]
    assert due(call, MONTHLY) == [] and due(call, WEEKLY) == []


def test_a_corrected_day_rebuilds_that_day_its_week_and_its_month_and_nothing_else(built, call):
    ws = built
    corrected = date(2026, 10, 31)  # in the week of 2026-10-26, which ends in November
    path = ws.raw / f"pesanan_{corrected}.csv"
    lines = path.read_text(encoding="utf-8").splitlines(True)
    path.write_text("".join(lines[:-5]), encoding="utf-8")
    before = {"orders": attempts(ws), "weekly": attempts(ws, "weekly_city_report"),
              "monthly": attempts(ws, "monthly_city_report")}
    files = {path.name: path.read_bytes() for path in ws.gold.glob("summary_*.csv")}

    assert due(call, ()) == [corrected.isoformat()]  # the changed raw file, reprocessed
    run_all(call, (), [corrected.isoformat()])
    assert due(call, WEEKLY) == ["2026-10-26"]
    assert due(call, MONTHLY) == [OCTOBER.isoformat()]
    run_all(call, WEEKLY, ["2026-10-26"])
    run_all(call, MONTHLY, [OCTOBER.isoformat()])

    changed = {name for name, data in files.items() if gold(ws, name) != data}
    assert changed == {f"summary_harian_{corrected}.csv", "summary_mingguan_2026-10-26.csv",
                       f"summary_bulanan_{OCTOBER}.csv"}
    after = {"orders": attempts(ws), "weekly": attempts(ws, "weekly_city_report"),
             "monthly": attempts(ws, "monthly_city_report")}
    rebuilt = {(name, key) for name in after for key in after[name]
               if after[name][key] != before[name][key]}
    assert rebuilt == {("orders", corrected.isoformat()), ("weekly", "2026-10-26"),
                       ("monthly", OCTOBER.isoformat())}
    assert month_gold(ws, OCTOBER) == independent_sum(ws.gold, OCTOBER, month_days(OCTOBER))
    assert csv_rows(ws.gold / "summary_mingguan_2026-10-26.csv")[1:] == \
        independent_week(ws.gold, date(2026, 10, 26))
    assert due(call, WEEKLY) == [] and due(call, MONTHLY) == []


@pytest.mark.parametrize("backend", ["sqlite"])
def test_an_identical_forced_rerun_of_a_day_rebuilds_nothing(built, call):
    ws = built
    files = {path.name: path.read_bytes() for path in ws.gold.glob("summary_*.csv")}
    run_all(call, (), ["2026-11-02"], "--force")
    assert due(call, WEEKLY) == [] and due(call, MONTHLY) == []
    code, out, err = call("status", *MONTHLY, "--json", "--now", CLOCK.isoformat())
    assert code == 0, err
    november = next(row for row in json.loads(out) if row["date"] == NOVEMBER.isoformat())
    assert november["state"] == "done"
    assert "2026-11-02 reprocessed, unchanged" in november["reason"]
    assert {path.name: path.read_bytes() for path in ws.gold.glob("summary_*.csv")} == files


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_date_that_starts_no_month_is_refused_naming_the_months_first_day(call):
    code, _, err = call("run", *MONTHLY, "--date", "2026-11-05")
    assert code == 2
    assert "2026-11-05 is not the first date of a monthly partition (the first day of a " \
        "month); its partition is 2026-11-01" in err
