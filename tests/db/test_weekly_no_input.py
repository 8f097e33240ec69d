"""No silent empty report: a week whose seven orders dates are all missing has no input. It is
its own state in `status`, is not due, and a run of it builds nothing: no gold file, no
watermark entry, a `no input` manifest, exit 1, a `/fail` ping. A week with some days missing
is built and names them. A date that arrives later makes the no-input week due (and the sweep
lists it), and it builds. Real runs of the command line on generated partitions, real HTTP
pings, on both warehouses."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from devtools.samples import generate_partition
from tests.conftest import Workspace, in_process_cli
from tests.ping_server import PingServer
from tests.weekly_sums import csv_rows, independent_week

ZONE = ZoneInfo("Asia/Jakarta")
FULL, EMPTY, PART = date(2026, 11, 2), date(2026, 11, 9), date(2026, 11, 16)
#: the days of PART without a file
GAPS = (date(2026, 11, 19), date(2026, 11, 20))
CLOCK = datetime(2026, 11, 24, 10, 0, tzinfo=ZONE)  # every date's wait window is over
WEEKLY = ("--pipeline", "weekly_city_report")


def week(first: date) -> list[date]:
    return [first + timedelta(days=n) for n in range(7)]


@pytest.fixture
def call(workspace: Workspace, monkeypatch, capsys):
    return in_process_cli(workspace, monkeypatch, capsys, CLOCK)


@pytest.fixture
def server():
    srv = PingServer().start()
    yield srv
    srv.stop()


def arrive(ws: Workspace, call, days: list[date]) -> None:
    """Write and process the orders files of `days`."""
    ws.raw.mkdir(parents=True, exist_ok=True)
    for day in days:
        generate_partition(ws.raw / f"pesanan_{day}.csv", day, 80, seed=day.day)
        code, out, err = call("run", "--date", day.isoformat())
        assert code == 0, out + err


@pytest.fixture
def orders(workspace: Workspace, call) -> Workspace:
    """FULL with its seven days, EMPTY with none, PART without GAPS: processed."""
    arrive(workspace, call, [*week(FULL), *(d for d in week(PART) if d not in GAPS)])
    return workspace


def rows(call) -> dict[str, dict]:
    code, out, err = call("status", *WEEKLY, "--json", "--now", CLOCK.isoformat())
    assert code == 0, err
    return {row["date"]: row for row in json.loads(out)}


def table_line(call, key: date) -> str:
    code, out, err = call("status", *WEEKLY, "--now", CLOCK.isoformat())
    assert code == 0, err
    return next(line for line in out.splitlines() if line.startswith(key.isoformat()))


def due(call) -> list[str]:
    code, out, err = call("due", *WEEKLY, "--now", CLOCK.isoformat())
    assert code == 0, err
    return out.split()


def weekly_state(ws: Workspace) -> dict:
    path = ws.state_dir / "weekly_city_report" / "state.json"
    return json.loads(path.read_text()) if path.exists() else {"runs": {}}


def weekly_manifests(ws: Workspace, key: date) -> list[dict]:
    folder = ws.state_dir / "weekly_city_report" / "runs"
    return [json.loads(path.read_text()) for path in sorted(folder.glob(f"run-{key}-*.json"))]


def test_a_week_whose_days_are_all_missing_has_no_input_and_publishes_nothing(
        orders, call, server):
    """Regression: a week whose seven days were all missing read "done, 0 kota" and published
    a header-only report: the weekly report went missing silently."""
    ws = orders
    row = rows(call)[EMPTY.isoformat()]
    assert (row["state"], row["label"], row["due"]) == ("no input", "no input", False)
    assert row["reason"] == (
        f"{EMPTY} has no input: all 7 of its orders dates ({EMPTY} to {EMPTY + timedelta(6)}) "
        "are missing (no file after their wait window); nothing is built and no report is "
        "published; it is built once one of them arrives and is done")
    assert row["reason"] in table_line(call, EMPTY)
    assert table_line(call, EMPTY).split()[1:3] == ["no", "input"]
    assert due(call) == [FULL.isoformat(), PART.isoformat()]

    code, out, err = call("run", *WEEKLY, "--date", EMPTY.isoformat(),
                          TOKOKITA_WEEKLY_CITY_REPORT__PING_URL=server.url)
    assert code == 1, out + err
    assert f"[no input] {row['reason']}" in out
    assert not (ws.gold / f"summary_mingguan_{EMPTY}.csv").exists()
    assert EMPTY.isoformat() not in weekly_state(ws)["runs"]  # no attempt, no success
    (manifest,) = weekly_manifests(ws, EMPTY)
    assert (manifest["status"], manifest["exit_code"], manifest["attempt"]) == ("no input", 1, 0)
    assert server.paths() == ["/fail"]  # the ping notifier: it needs a person's look
    summary = json.loads(server.received[0].body)
    assert (summary["status"], summary["partition_date"]) == ("no input", EMPTY.isoformat())
    assert summary["error"] == row["reason"]
    # a forced run builds no empty report either
    code, out, _ = call("run", *WEEKLY, "--date", EMPTY.isoformat(), "--force")
    assert code == 1 and "[no input]" in out
    assert not (ws.gold / f"summary_mingguan_{EMPTY}.csv").exists()
    assert rows(call)[EMPTY.isoformat()]["state"] == "no input"


def test_a_week_with_some_days_missing_is_built_and_names_them(orders, call):
    ws = orders
    code, out, err = call("run", *WEEKLY, "--date", PART.isoformat())
    assert code == 0, out + err
    named = f"2 missing: {GAPS[0]}, {GAPS[1]}"
    assert f"of 5 done dates ({named}) ->" in out  # the collect line
    assert f"from 5 done dates ({named})" in out  # the summary line
    assert (ws.gold / f"summary_mingguan_{PART}.csv").exists()
    row = rows(call)[PART.isoformat()]
    built_without = f"built without {GAPS[0]}, {GAPS[1]} (missing)"
    assert row["state"] == "done" and built_without in row["reason"]
    assert built_without in table_line(call, PART)
    # one of them arrives: the week is due again for it, and the other is still named
    arrive(ws, call, [GAPS[0]])
    row = rows(call)[PART.isoformat()]
    assert row["state"] == "due"
    assert f"{GAPS[0]} processed since, no longer missing" in row["reason"]
    assert f"built without {GAPS[1]} (missing)" in row["reason"]
    assert f"built without {GAPS[0]}" not in row["reason"]


def test_a_date_arriving_later_makes_the_no_input_week_due_and_it_builds(orders, call):
    from tokokita_etl.pipelines import by_name, settings_of
    from tokokita_etl.runner.propagation import sweep

    ws = orders
    weekly = by_name("weekly_city_report")

    def needs():
        return sweep(weekly, settings_of(weekly, env=ws.env(), cwd=ws.root), CLOCK)

    code, _, _ = call("run", *WEEKLY, "--date", EMPTY.isoformat())
    assert code == 1
    assert [n.key for n in needs()] == []  # nothing arrived: nothing to sweep
    late = EMPTY + timedelta(days=2)
    arrive(ws, call, [late])
    assert EMPTY.isoformat() in due(call)
    row = rows(call)[EMPTY.isoformat()]
    assert (row["state"], row["reason"]) == (
        "due", "its inputs are settled: the scheduled catch-up runs it only if it has no "
        f"Airflow run yet; else trigger tokokita_weekly_city_report with partition key {EMPTY}, "
        f"or run `tokokita-etl run --pipeline weekly_city_report --date {EMPTY}`")
    (need,) = [n for n in needs() if n.key == EMPTY]  # on Airflow the sweep triggers its run
    assert need.reason.startswith("an input arrived after the run started ")
    assert need.reason.endswith(" found none")
    code, out, err = call("run", *WEEKLY, "--date", EMPTY.isoformat())
    assert code == 0, out + err
    gold = ws.gold / f"summary_mingguan_{EMPTY}.csv"
    assert gold.exists()
    assert csv_rows(gold)[1:] == independent_week(ws.gold, EMPTY) != []
    entry = weekly_state(ws)["runs"][EMPTY.isoformat()]
    assert entry["rows"]["days"] == 1 and entry["rows"]["missing"] == 6
    assert rows(call)[EMPTY.isoformat()]["state"] == "done"
    assert [n.key for n in needs()] == []
