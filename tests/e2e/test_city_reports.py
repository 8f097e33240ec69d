"""The weekly and the monthly city reports on a running Airflow, beside the orders: the chain
day -> week -> month. A three-week and a two-month catch-up, each partition equal to an
independent sum of its daily gold files; a corrected raw file that rebuilds its day, its week
and its month without a person, and nothing else; an identical reprocess that rebuilds
nothing; a blocked date that holds its week; the status page of the three pipelines.

M1 and M2 are the last two months whose monthly run (the 2nd, 05:00 Jakarta) has fired; W1,
W2 and W3 the last three whole weeks inside them. The orders' dates of M1 and M2 (one file
missing, in W1, its wait window long over) are processed while the weekly DAG catches up
W1..W3 and the monthly DAG M1 and M2, their sensors waiting for them. The orders reprocess a
changed raw file (`on_raw_change: reprocess`) and the sweep runs every minute.

Screenshots are written to docs/screenshots/ only with TOKOKITA_SAVE_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from stack.ephemeral import DAG_ID, PASSWORD, USERNAME, EphemeralStack, fire_time
from stack.rest import AirflowApi, wait_for
from tests.conftest import run_cli
from tests.weekly_sums import WEEK_HEADER, csv_rows, independent_sum, independent_week
from tokokita_etl.runner.schedule import MONTHLY

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

JKT = ZoneInfo("Asia/Jakarta")
WEEKLY_DAG = "tokokita_weekly_city_report"
MONTHLY_DAG = "tokokita_monthly_city_report"
MONTH_HEADER = ["month_start", *WEEK_HEADER[1:]]
SWEEP_DAG = "tokokita_sweep"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def last_built_month() -> date:
    """The first day of the last month whose monthly run (the 2nd, 05:00) fired over an hour
    ago."""
    now = datetime.now(UTC).astimezone(JKT)
    this_month = MONTHLY.start(now.date())
    if now < datetime.combine(this_month + timedelta(days=1), time(6, 0), tzinfo=JKT):
        this_month = MONTHLY.start(this_month - timedelta(days=1))
    return MONTHLY.start(this_month - timedelta(days=1))


M2 = last_built_month()
M1 = MONTHLY.start(M2 - timedelta(days=1))
M2_END = MONTHLY.next(M2) - timedelta(days=1)
# the Monday of the last whole week inside M2 (its weekly run fired before M2's monthly run)
W3 = M2_END - timedelta(days=(M2_END.weekday() + 1) % 7 + 6)
W2, W1 = W3 - timedelta(days=7), W3 - timedelta(days=14)
DAYS = [M1 + timedelta(days=n) for n in range((M2_END - M1).days + 1)]
MISSING = W1 + timedelta(days=3)
CHANGED = W2 + timedelta(days=2)  # its raw file corrected: week 2 rebuilt
SAME = W1 + timedelta(days=1)  # reprocessed to identical results: nothing rebuilt
BAD = W3 + timedelta(days=4)  # blocked: holds week 3
CHANGED_MONTH = MONTHLY.start(CHANGED)  # rebuilt with week 2; the other month is not


def weekly_pipeline():
    from tokokita_etl.weekly.pipeline import WEEKLY_CITY_REPORT

    return WEEKLY_CITY_REPORT


def monthly_pipeline():
    from tokokita_etl.monthly.pipeline import MONTHLY_CITY_REPORT

    return MONTHLY_CITY_REPORT


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A stack whose weekly catch-up of W1..W3 and monthly catch-up of M1 and M2 have
    finished: the orders' dates but the last processed from the command line on the stack's
    own settings (as an operator loading history would; the orders DAG's catch-up is tested
    elsewhere), the last by the orders DAG's catch-up, while the reports' runs wait for
    them."""
    from devtools.samples import generate_partition
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.sequence import run_for_date

    stack = EphemeralStack(
        tmp_path_factory.mktemp("weekly"), start_date=str(DAYS[-1] + timedelta(days=1)),
        end_date=fire_time(DAYS[-1]).isoformat(),
        # as a user sets them in the shell before starting the stack (compose variables:
        # they reach the services through docker-compose.yaml's generated block)
        tokokita_env={"TOKOKITA_WEEKLY_CITY_REPORT__START_DATE": str(W2),
                      "TOKOKITA_WEEKLY_CITY_REPORT__END_DATE": f"{W3 + timedelta(days=7)}"
                                                               "T05:00:00+07:00",
                      "TOKOKITA_MONTHLY_CITY_REPORT__START_DATE": str(M2),
                      "TOKOKITA_MONTHLY_CITY_REPORT__END_DATE": f"{M2_END + timedelta(days=2)}"
                                                                "T06:00:00+07:00",
                      # the sweep looks back as far as the corrected date (up to 7 weeks)
                      "TOKOKITA_LOOKBACK_DAYS": "70",
                      "TOKOKITA_WEEKLY_CITY_REPORT__LOOKBACK_DAYS": "70",
                      "TOKOKITA_ON_RAW_CHANGE": "reprocess",
                      "TOKOKITA_SWEEP_CRON": "* * * * *"})
    try:
        stack.prepare()
        raw = stack.data / "raw"
        for day in DAYS:
            if day != MISSING:
                generate_partition(raw / f"pesanan_{day}.csv", day, 40, seed=day.toordinal())
        stack.start()
        stack.api.wait_dag(DAG_ID, timeout=120)
        stack.api.wait_dag(WEEKLY_DAG, timeout=120)
        stack.api.wait_dag(MONTHLY_DAG, timeout=120)
        settings = stack.settings()
        for day in DAYS[:-1]:
            outcome = run_for_date(ORDERS, settings, day, log=lambda _line: None)
            assert outcome.status == ("missing" if day == MISSING else "success"), outcome
        wait_for(lambda: _finished(stack, DAG_ID, 1), 300, 2, "the orders' catch-up")
        wait_for(lambda: _finished(stack, WEEKLY_DAG, 3), 420, 2, "the weekly catch-up")
        wait_for(lambda: _finished(stack, MONTHLY_DAG, 2), 300, 2, "the monthly catch-up")
        yield stack
    finally:
        stack.close()


def _finished(stack: EphemeralStack, dag_id: str, count: int) -> list[dict] | None:
    runs = [r for r in stack.api.dag_runs(dag_id) if r["run_type"] == "scheduled"]
    done = len(runs) == count and all(r["state"] in ("success", "failed") for r in runs)
    return runs if done else None


def _gold(stack: EphemeralStack, week: date) -> Path:
    return stack.data / "gold" / f"summary_mingguan_{week}.csv"


def _month_gold(stack: EphemeralStack, month: date) -> Path:
    return stack.data / "gold" / f"summary_bulanan_{month}.csv"


def _sweep_runs(stack: EphemeralStack, dag_id: str, key: date) -> list[dict]:
    return [r for r in stack.api.dag_runs(dag_id)
            if r["dag_run_id"].startswith(f"sweep__{key}__")]


def _ended(runs: list[dict]) -> list[dict] | None:
    return runs if runs and all(r["state"] in ("success", "failed") for r in runs) else None


def test_a_three_week_catch_up_equals_an_independent_sum_of_the_daily_gold_files(report):
    stack = report
    runs = _finished(stack, WEEKLY_DAG, 3)
    assert sorted(r["partition_key"] for r in runs) == [str(W1), str(W2), str(W3)]
    assert {r["state"] for r in runs} == {"success"}
    weeks = stack.watermark(weekly_pipeline())
    for week in (W1, W2, W3):
        assert csv_rows(_gold(stack, week)) == [
            WEEK_HEADER, *independent_week(stack.data / "gold", week)], week
        assert weeks[str(week)]["status"] == "success"
    assert weeks[str(W1)]["rows"]["missing"] == 1  # a missing file, built after its window
    assert weeks[str(W1)]["built_from"][str(MISSING)] == {"checksum": None, "attempt": 0}


def test_a_two_month_catch_up_equals_an_independent_sum_of_the_daily_gold_files(report):
    stack = report
    runs = _finished(stack, MONTHLY_DAG, 2)
    assert sorted(r["partition_key"] for r in runs) == [str(M1), str(M2)]
    assert {r["state"] for r in runs} == {"success"}
    months = stack.watermark(monthly_pipeline())
    for month in (M1, M2):
        assert csv_rows(_month_gold(stack, month)) == [
            MONTH_HEADER, *independent_sum(stack.data / "gold", month, MONTHLY.dates(month))]
        assert months[str(month)]["status"] == "success"
        assert len(months[str(month)]["built_from"]) == len(MONTHLY.dates(month))
    with_missing = MONTHLY.start(MISSING)
    assert months[str(with_missing)]["rows"]["missing"] == 1
    assert months[str(with_missing)]["built_from"][str(MISSING)] == {"checksum": None,
                                                                      "attempt": 0}


def test_an_identical_forced_reprocess_of_a_day_rebuilds_nothing(report):
    """Its week stays done and unchanged; the sweeps that the next test waits for (two at
    least) make no run of it, which the next test asserts."""
    stack = report
    weeks_before = stack.watermark(weekly_pipeline())
    months_before = stack.watermark(monthly_pipeline())
    run = stack.api.trigger(DAG_ID, {"force": True}, partition_key=str(SAME))
    assert stack.api.wait_run(DAG_ID, run["dag_run_id"])["state"] == "success"
    assert stack.watermark()[str(SAME)]["attempt"] == 2
    assert stack.watermark(weekly_pipeline()) == weeks_before
    assert stack.watermark(monthly_pipeline()) == months_before
    assert _status_page(stack, "weekly_city_report")[str(W1)]["state"] == "done"
    # the sweeps of the next test (at least two) make no run of week 1 either


def test_a_corrected_raw_file_rebuilds_its_week_and_its_month_without_a_person_and_only_them(
        report):
    """The sweep is paused twice only to look at the page between its steps, as a person
    would; every run is the sweep's. Regression: `TOKOKITA_ON_RAW_CHANGE=reprocess` set in
    the shell that started the stack reached `tokokita-etl status` there ("due (raw
    changed) ... the sweep DAG runs it again") and not the stack's services, which never
    reprocessed the date: the variables are now given as compose variables, as a shell is."""
    stack = report
    before = {week: _gold(stack, week).read_bytes() for week in (W1, W2, W3)}
    weeks_before = stack.watermark(weekly_pipeline())
    months_gold = {month: _month_gold(stack, month).read_bytes() for month in (M1, M2)}
    months_before = stack.watermark(monthly_pipeline())
    stack.api.set_paused(SWEEP_DAG, True)
    try:
        _correct_and_watch(stack, before, weeks_before)
    finally:  # the next test relies on the sweep
        stack.api.set_paused(SWEEP_DAG, False)
    [monthly_run] = wait_for(lambda: _ended(_sweep_runs(stack, MONTHLY_DAG, CHANGED_MONTH)),
                             300, 2, "the sweep's rebuild of the corrected date's month")
    assert (monthly_run["state"], monthly_run["partition_key"]) == ("success",
                                                                    str(CHANGED_MONTH))
    assert f"sweep: {CHANGED_MONTH} {CHANGED} reprocessed, checksums changed" in \
        monthly_run["note"]
    months = stack.watermark(monthly_pipeline())
    assert months[str(CHANGED_MONTH)]["attempt"] == \
        months_before[str(CHANGED_MONTH)]["attempt"] + 1
    assert _month_gold(stack, CHANGED_MONTH).read_bytes() != months_gold[CHANGED_MONTH]
    assert csv_rows(_month_gold(stack, CHANGED_MONTH)) == [
        MONTH_HEADER, *independent_sum(stack.data / "gold", CHANGED_MONTH,
                                       MONTHLY.dates(CHANGED_MONTH))]
    [other] = {M1, M2} - {CHANGED_MONTH}
    assert _month_gold(stack, other).read_bytes() == months_gold[other]
    assert months[str(other)] == months_before[str(other)]
    assert _sweep_runs(stack, MONTHLY_DAG, other) == []
    assert _status_page(stack, "monthly_city_report")[str(CHANGED_MONTH)]["attempt"] == 2
    _look(stack, "monthly_city_report", CHANGED_MONTH, "done", "status-monthly.png")


def _correct_and_watch(stack: EphemeralStack, before: dict[date, bytes],
                       weeks_before: dict) -> None:
    """Correct CHANGED's raw file, look at both pipelines' pages, then let the sweep
    reprocess the date and rebuild week 2, and only it."""
    raw = stack.data / "raw" / f"pesanan_{CHANGED}.csv"
    lines = raw.read_text(encoding="utf-8").splitlines(keepends=True)
    raw.write_text("".join(lines[:len(lines) // 2]), encoding="utf-8")
    orders_page = _status_page(stack, "orders")
    assert orders_page[str(CHANGED)]["label"] == "due (raw changed)"
    # the command line in the shell that started the stack says the same, and what follows
    shell = _shell(stack)
    assert shell["TOKOKITA_ON_RAW_CHANGE"] == "reprocess"
    said = run_cli(["status", "--json", "--days", "40"], cwd=stack.home, env=shell)
    assert said.returncode == 0, said.stderr
    [row] = [row for row in json.loads(said.stdout) if row["date"] == str(CHANGED)]
    assert row["label"] == "due (raw changed)"
    assert "on Airflow the sweep DAG runs it again" in row["reason"]
    now = datetime.now(UTC).astimezone(JKT).strftime("%Y-%m-%dT%H:%M")
    due = run_cli(["due", "--json", "--now", now], cwd=stack.home, env=shell)
    assert due.returncode == 0, due.stderr
    assert str(CHANGED) in json.loads(due.stdout)
    _look(stack, "orders", CHANGED, "due (raw changed)", "status-orders-raw-changed.png")

    stack.api.set_paused(SWEEP_DAG, False)
    [orders_run] = wait_for(lambda: _ended(_sweep_runs(stack, DAG_ID, CHANGED)), 300, 1,
                            "the sweep's run of the corrected date")
    stack.api.set_paused(SWEEP_DAG, True)
    assert (orders_run["state"], orders_run["partition_key"]) == ("success", str(CHANGED))
    rows = _status_page(stack, "weekly_city_report")
    if not _sweep_runs(stack, WEEKLY_DAG, W2):  # the sweep had not found the week yet
        assert rows[str(W2)]["label"] == "due (changed)"
        assert f"{CHANGED} reprocessed, checksums changed" in rows[str(W2)]["reason"]
    _look(stack, "weekly_city_report", W1, f"{SAME} reprocessed, unchanged",
          "status-weekly-reasons.png")

    stack.api.set_paused(SWEEP_DAG, False)
    [weekly_run] = wait_for(lambda: _ended(_sweep_runs(stack, WEEKLY_DAG, W2)), 300, 2,
                            "the sweep's rebuild of week 2")
    assert (weekly_run["state"], weekly_run["partition_key"]) == ("success", str(W2))
    assert f"sweep: {W2} {CHANGED} reprocessed, checksums changed" in weekly_run["note"]
    weeks = stack.watermark(weekly_pipeline())
    assert weeks[str(W2)]["attempt"] == weeks_before[str(W2)]["attempt"] + 1
    assert _gold(stack, W2).read_bytes() != before[W2]
    assert csv_rows(_gold(stack, W2)) == [WEEK_HEADER,
                                          *independent_week(stack.data / "gold", W2)]
    for week in (W1, W3):
        assert _gold(stack, week).read_bytes() == before[week]
        assert weeks[str(week)] == weeks_before[str(week)]
    assert _sweep_runs(stack, WEEKLY_DAG, W1) == []  # its day reprocessed unchanged


def test_a_blocked_date_holds_its_week_with_the_reason_on_the_page(report):
    stack = report
    (stack.data / "raw" / f"pesanan_{BAD}.csv").write_text("garbage\n", encoding="utf-8")
    [swept] = wait_for(lambda: _ended(_sweep_runs(stack, DAG_ID, BAD)), 300, 2,
                       "the sweep's run of the broken date")
    assert swept["state"] == "failed"
    for _ in range(2):
        run = stack.api.trigger(DAG_ID, {"force": True}, partition_key=str(BAD))
        assert stack.api.wait_run(DAG_ID, run["dag_run_id"])["state"] == "failed"
    assert stack.watermark()[str(BAD)]["failures"] == 3
    row = _status_page(stack, "weekly_city_report")[str(W3)]
    assert f"a rebuild waits for {BAD} (blocked 3/3)" in row["reason"]
    run = stack.api.trigger(WEEKLY_DAG, {"force": True}, partition_key=str(W3))

    def sensor_state() -> str | None:
        task = stack.api.task_instances(WEEKLY_DAG, run["dag_run_id"]).get("wait_for_inputs")
        state = (task or {}).get("state")
        return state if state in ("up_for_reschedule", "success", "skipped", "failed") \
            else None

    # it waits: a week is never built from a blocked day, forced or not
    assert wait_for(sensor_state, 120, 1, "the forced week's sensor to poke") \
        == "up_for_reschedule"


def _shell(stack: EphemeralStack) -> dict[str, str]:
    """The environment of a shell that started the stack: the settings' variables its
    services got (none of them given to the services but through the compose file), with the
    folders and the warehouse where this stack keeps them."""
    from stack.compose import settings_variables

    env = stack.service_env()
    shell = {name: env[name] for name in settings_variables() if env.get(name)}
    shell["TOKOKITA_WAREHOUSE_URL"] = stack.settings().warehouse_url
    return shell


def _status_page(stack: EphemeralStack, pipeline: str) -> dict[str, dict]:
    import httpx

    token = AirflowApi(stack.target.api_url, USERNAME, PASSWORD).login()
    with httpx.Client(base_url=stack.target.api_url, timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as api:
        answer = api.get("/tokokita/status.json", params={"pipeline": pipeline})
        answer.raise_for_status()
        return {row["date"]: row for row in answer.json()}


def _look(stack: EphemeralStack, pipeline: str, key: date, text: str, name: str) -> None:
    """In Chromium, as a person reaches it (Browse > TokoKita status, then the pipeline's
    tab): the row of `key` shows `text`; saved to docs/screenshots/`name` when asked."""
    from tests.browser import chromium, open_status_page

    token = AirflowApi(stack.target.api_url, USERNAME, PASSWORD).login()
    with chromium() as browser:
        context, page, frame = open_status_page(browser, stack.target.api_url, token,
                                                height=1100)
        assert frame.locator("#pipelines a").all_inner_texts() == [
            "orders", "weekly_city_report", "monthly_city_report"]
        tab = frame.locator(f"#tab-{pipeline}")
        if tab.get_attribute("aria-current") != "page":  # a person does not reopen the tab shown
            tab.click()
            # the tab's link loads another page: wait for it, not for the page it replaces
            frame.locator(f"#tab-{pipeline}[aria-current=page]").wait_for()
        frame.locator("h1", has_text=f"TokoKita {pipeline}").wait_for()
        if pipeline != "orders":
            assert frame.locator("#chart").count() == 0  # the orders' daily figures only
            assert frame.locator("#dates th").all_inner_texts() == [
                "date", "state", "why", "attempts", "days", "missing", "kota", "bruto",
                "bersih", "duration", "Airflow runs", "action"]
        row = frame.locator(f"#d-{key}")
        row.scroll_into_view_if_needed()
        assert text in row.inner_text()
        if os.environ.get("TOKOKITA_SAVE_SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SCREENSHOTS / name)
        context.close()
