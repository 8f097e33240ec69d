"""A person's Mark during `load` and a warehouse that is not the watermark's, on a running
Airflow (LocalExecutor, PostgreSQL warehouse; connections in Airflow's metadata database).

- T-3: 40 rows, processed by the catch-up; a forced run of it on another, empty database is
  refused.
- T-2: 1,000,000 rows, processed by the catch-up; forced re-runs over a corrected file are
  marked success, then failed, while their `load` runs, in Chromium as a person does (the
  task instance page's *Mark Task Instance as...*, the dialog's defaults).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import psycopg
import pytest

from stack.ephemeral import DAG_ID, PASSWORD, USERNAME, EphemeralStack, admin_conninfo, fire_time
from stack.rest import TERMINAL, AirflowApi, wait_for
from tests.browser import chromium
from tests.e2e.ui_stack import UI_TIMEOUT_MS, log_in, new_context
from tokokita_etl.orders.pipeline import ORDERS

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

#: written only with TOKOKITA_SAVE_SCREENSHOTS=1
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

JKT = ZoneInfo("Asia/Jakarta")
BIG_ROWS = 1_000_000


def today_in_jakarta() -> date:
    return datetime.now(UTC).astimezone(JKT).date()


@pytest.fixture(scope="module")
def marks(tmp_path_factory):
    """The stack with its two scheduled runs (T-3, T-2) done."""
    from devtools.samples import generate_partition

    today = today_in_jakarta()
    small, big = today - timedelta(days=3), today - timedelta(days=2)
    stack = EphemeralStack(tmp_path_factory.mktemp("marks"), start_date=small.isoformat(),
                           end_date=fire_time(big).isoformat(), connections="rest")
    # the supervisor asks the api-server every second whether its task should still run
    stack.target.extra_env["AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL"] = "1"
    try:
        stack.prepare()
        raw = stack.data / "raw"
        generate_partition(raw / f"pesanan_{small}.csv", small, 40, seed=3)
        generate_partition(raw / f"pesanan_{big}.csv", big, BIG_ROWS, seed=1)
        stack.start()
        stack.api.wait_dag(DAG_ID, timeout=120)
        wait_for(lambda: all(stack.watermark().get(str(day), {}).get("status") == "success"
                             for day in (small, big)) or None,
                 600, 2, "the catch-up to process T-3 and T-2")
        wait_for(lambda: all(r["state"] in TERMINAL for r in stack.api.dag_runs(DAG_ID))
                 or None, 120, 1, "the catch-up's runs to end")
        yield stack, small, big
    finally:
        stack.close()


def fact_checksum(stack: EphemeralStack, day: date) -> str:
    from tokokita_etl.orders.checksums import fact_digest
    from tokokita_etl.warehouse.database import Warehouse

    warehouse = Warehouse.from_settings(stack.settings())
    with warehouse.begin(read_only=True) as conn:
        return fact_digest(warehouse, conn, day).checksum


def status_row(stack: EphemeralStack, day: date) -> dict:
    from tokokita_etl.runner.status import status_rows

    return next(r for r in status_rows(ORDERS, stack.settings()) if r["date"] == str(day))


def status_page(stack: EphemeralStack, day: date, screenshot: str) -> dict[str, str]:
    """The status page in Chromium, as a signed-in person opens it: `day`'s row (state, label,
    reason) and the refusal banner's text ('' when there is none); a screenshot of it with
    TOKOKITA_SAVE_SCREENSHOTS=1."""
    with signed_in_page(stack) as page:
        page.goto(f"{stack.target.api_url}/tokokita/")
        row = page.locator(f"#d-{day}")
        row.wait_for(timeout=60_000)
        banner = page.locator("#warehouse-problem")
        found = {"state": row.get_attribute("data-state") or "",
                 "label": row.locator("td.state").inner_text(),
                 "reason": row.locator("td.why").inner_text(),
                 "banner": banner.inner_text() if banner.count() else ""}
        if os.environ.get("TOKOKITA_SAVE_SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            row.scroll_into_view_if_needed()
            page.screenshot(path=SCREENSHOTS / screenshot)
    return found


@contextmanager
def signed_in_page(stack: EphemeralStack) -> Iterator[Page]:
    """A page of Chromium in Jakarta time, signed in through Airflow's login page."""
    with chromium() as browser:
        context = new_context(browser)
        try:
            page = context.new_page()
            page.set_viewport_size({"width": 1500, "height": 900})  # the status page's columns
            log_in(page, stack.target.api_url)
            yield page
        finally:
            context.close()


def open_task_instance(page: Page, task_id: str) -> None:
    """On the open run page, the task instance `task_id` from the run's task table, as a
    person clicks it (its state shown: running)."""
    from playwright.sync_api import expect

    page.get_by_role("table").get_by_role("link", name=task_id, exact=True).click()
    expect(page).to_have_url(re.compile(rf"/tasks/{task_id}$"), timeout=UI_TIMEOUT_MS)
    # the URL changes before the page does: until the run's task table (a Mark menu on each
    # row) has given way to the task instance page, its one Mark menu is not yet alone
    expect(page.get_by_role("button", name="Mark Task Instance as...")).to_have_count(
        1, timeout=UI_TIMEOUT_MS)


def mark_in_the_ui(page: Page, state: str, screenshot: str) -> None:
    """On the open task instance page, as a person marks it: *Mark Task Instance as...*,
    `state` in its menu, then *Confirm* in the dialog with its defaults (no past, future,
    upstream or downstream: this task instance alone)."""
    from playwright.sync_api import expect

    page.get_by_role("button", name="Mark Task Instance as...").click()
    page.get_by_role("menuitem", name=state.capitalize()).click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_text(f"Mark Task Instance as {state}:")).to_be_visible(
        timeout=UI_TIMEOUT_MS)
    expect(dialog.get_by_text("Affected Tasks: 1")).to_be_visible()  # load alone
    if os.environ.get("TOKOKITA_SAVE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / screenshot, animations="disabled")
    dialog.get_by_role("button", name="Confirm").click()
    expect(dialog).to_be_hidden(timeout=UI_TIMEOUT_MS)


def wait_running(stack: EphemeralStack, run_id: str, task_id: str) -> None:
    wait_for(lambda: stack.api.task_instances(DAG_ID, run_id)[task_id]["state"] == "running"
             or None, 300, 0.1, f"{task_id} of {run_id} to run")


@pytest.mark.parametrize("mark", ["success", "failed"])
def test_a_mark_while_load_runs_stops_it_merges_nothing_and_counts_no_failure(marks, mark):
    """Bug: marked while `load` of a 1M-row partition ran, the load still merged all its
    rows after "Terminating process", and each mark was recorded as a failure of the
    partition (two marks: failure 2/3)."""
    from devtools.samples import generate_partition

    stack, _, big = marks
    before = stack.watermark()[str(big)]
    assert before.get("status") == "success", (before, stack.api.dag_runs(DAG_ID))
    recorded = before["checksums"][f"fact_{big}"]
    assert fact_checksum(stack, big) == recorded
    # a corrected file: had the stopped load merged anything, the rows would change
    generate_partition(stack.data / "raw" / f"pesanan_{big}.csv", big, BIG_ROWS,
                       seed=7 if mark == "success" else 8)
    with signed_in_page(stack) as page:
        run = stack.api.trigger(DAG_ID, {"force": True}, partition_key=str(big))
        run_id = run["dag_run_id"]
        page.goto(f"{stack.target.api_url}/dags/{DAG_ID}/runs/{run_id}")
        wait_running(stack, run_id, "load")
        started = time.monotonic()
        open_task_instance(page, "load")
        # inside the load's transaction (a 1M-row load takes several seconds)
        time.sleep(max(0.0, 1.5 - (time.monotonic() - started)))
        mark_in_the_ui(page, mark, f"ui-mark-{mark}-during-load.png")
    wait_for(lambda: stack.api.dag_run(DAG_ID, run_id)["state"] in TERMINAL or None, 180, 1,
             f"run {run_id} to end")

    # Mark failed ends the run at once, before the supervisor has stopped the task process
    # (it asks the api-server every second): the stage's own account of its stop comes after
    def stopped_log() -> str | None:
        text = stack.task_log(run_id, "load")
        return text if "Stopped, no failure recorded" in text else None

    log = wait_for(stopped_log, 60, 1, "the load's log to say it stopped")
    assert "Airflow stops stage load while it runs" in log, log[-3000:]
    assert fact_checksum(stack, big) == recorded  # the earlier rows: nothing merged
    after = stack.watermark()[str(big)]
    assert after["failures"] == before["failures"] == 0
    assert after["attempt"] == before["attempt"]
    # the stage's own stop or the run's end (its listener), whichever is noted first: with
    # Mark success the run can end, its later stages skipped, before the load has stopped
    assert after["in_progress"]["stopped"].startswith(
        ("stage load stopped by Airflow", "its run ended with a stage cleared alone or marked"))
    # the warehouse call the stop interrupted ("another command is already in progress") is
    # in the task's log, not in the reason a person reads
    assert "warehouse" not in after["in_progress"]["stopped"], after["in_progress"]
    row = status_row(stack, big)
    assert (row["state"], row["label"]) == ("needs re-run", "needs re-run"), row
    assert "records no failure" in row["reason"]
    shown = status_page(stack, big, f"status-after-mark-{mark}-during-load.png")
    assert (shown["state"], shown["label"]) == ("needs re-run", "needs re-run"), shown
    assert "records no failure" in shown["reason"] and not shown["banner"], shown
    states = {t: ti["state"] for t, ti in stack.api.task_instances(DAG_ID, run_id).items()}
    if mark == "success":  # the rest of the run does not validate rows it never loaded
        assert states["validate"] == states["publish_gold"] == "skipped", states
        # bug: validate's log said only Airflow's "Skipping task."; it says why first
        # (publish_gold, skipped by Airflow's trigger rule, never runs: no log)
        skipped = stack.task_log(run_id, "validate")
        assert '"event":"Skipped: ' in skipped, skipped[-3000:]
    assert [m["status"] for m in stack.manifests(big)].count("stopped") >= 1


def test_after_the_marks_a_plain_run_reprocesses_the_date_with_no_failure_counted(marks):
    stack, _, big = marks
    wait_for(lambda: all(r["state"] in TERMINAL for r in stack.api.dag_runs(DAG_ID)) or None,
             300, 1, "the marked runs to end")
    run = stack.api.trigger(DAG_ID, partition_key=str(big))
    finished = stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=300)
    assert finished["state"] == "success"
    entry = stack.watermark()[str(big)]
    assert (entry["status"], entry["failures"]) == ("success", 0)
    assert fact_checksum(stack, big) == entry["checksums"][f"fact_{big}"]
    assert status_row(stack, big)["label"] == "done"


def test_a_run_on_another_empty_database_is_refused_at_once_and_creates_nothing(marks):
    """Bug: the same watermark pointed at a fresh, empty PostgreSQL database ran and
    succeeded there; the watermark then described data that was not there."""
    stack, small, _ = marks
    empty = f"tokokita_empty_{stack.id}"
    with psycopg.connect(admin_conninfo(), autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{empty}"')
    original = stack.api.get("/connections/tokokita_warehouse")
    try:
        before = stack.watermark()[str(small)]
        stack.api.patch_connection("tokokita_warehouse", {
            "conn_type": original["conn_type"], "host": original["host"],
            "port": original["port"], "login": original["login"],
            "password": stack.connections["tokokita_warehouse"].password,
            "schema": empty})
        run = stack.api.trigger(DAG_ID, {"force": True}, partition_key=str(small))
        finished = stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=180)
        assert finished["state"] == "failed"
        states = {t: ti["state"] for t, ti in
                  stack.api.task_instances(DAG_ID, run["dag_run_id"]).items()}
        assert states["check_watermark"] == "failed" and states["extract"] != "success", states
        log = stack.task_log(run["dag_run_id"], "check_watermark")
        assert "is not the one the watermark" in log and before["warehouse"]["id"] in log
        assert stack.watermark()[str(small)] == before  # no attempt, no intent
        shown = status_page(stack, small, "status-warehouse-refused.png")
        assert "is not the one the watermark" in shown["banner"], shown
        assert before["warehouse"]["id"] in shown["banner"]
        # bug: the banner did not name the connection; its first line is the sentence the
        # refused task's log ends with
        sentence = ("Airflow connection 'tokokita_warehouse' is not the warehouse the watermark "
                    "describes: point it at that warehouse, or after a real loss run "
                    "`tokokita-etl state reconcile`")
        assert shown["banner"].splitlines()[0] == f"Every run is refused: {sentence}", shown
        assert sentence in log, log[-2000:]  # the failure Airflow logs: its exception
        with psycopg.connect(psycopg.conninfo.make_conninfo(admin_conninfo(), dbname=empty),
                             connect_timeout=10) as conn:
            assert conn.execute("SELECT count(*) FROM information_schema.tables "
                                "WHERE table_schema = 'public'").fetchone()[0] == 0
    finally:
        stack.api.patch_connection("tokokita_warehouse", {
            "conn_type": original["conn_type"], "host": original["host"],
            "port": original["port"], "login": original["login"],
            "password": stack.connections["tokokita_warehouse"].password,
            "schema": original["schema"]})
        with psycopg.connect(admin_conninfo(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{empty}"')
    run = stack.api.trigger(DAG_ID, {"force": True}, partition_key=str(small))
    assert stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=180)["state"] == "success"


def test_a_stage_cleared_alone_reads_needs_re_run_and_the_next_run_counts_no_failure(marks):
    """Bug: after clearing `load` alone (Downstream unticked) the grid was all green, the
    status page said "1 failed" and "counts as failure 1/3", the command line "needs re-run",
    and the next run recorded no failure: three readings and a wrong prediction."""
    stack, small, _ = marks
    run = next(r for r in stack.api.dag_runs(DAG_ID) if r["partition_key"] == str(small)
               and r["state"] == "success")
    before = stack.watermark()[str(small)]
    stack.api.clear_task_instances(DAG_ID, run["dag_run_id"], ["load"], only_failed=False,
                                   downstream=False)
    wait_for(lambda: stack.api.dag_run(DAG_ID, run["dag_run_id"])["state"] not in TERMINAL
             or None, 10, 0.2, "the clear to queue the run again")
    assert stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=180)["state"] == "success"
    shown = status_page(stack, small, "status-after-clearing-load-alone.png")
    assert (shown["state"], shown["label"]) == ("needs re-run", "needs re-run"), shown
    assert "the next run records no failure" in shown["reason"], shown
    again = stack.api.trigger(DAG_ID, partition_key=str(small))
    assert stack.api.wait_run(DAG_ID, again["dag_run_id"], timeout=180)["state"] == "success"
    after = stack.watermark()[str(small)]
    assert (after["status"], after["failures"]) == ("success", before["failures"])
    assert status_page(stack, small, "status-after-the-next-run.png")["label"] == "done"


def test_the_status_page_links_the_log_that_holds_a_skipped_runs_reason(marks):
    """Bug: a skipped run's row linked the gate's log ("Task was skipped — no logs
    available"), not the sensor's, which holds the reason."""
    import httpx

    stack, _, big = marks
    missing = big + timedelta(days=1)  # no file: the sensor skips a manual run at once
    skipped = stack.api.trigger(DAG_ID, partition_key=str(missing))
    assert stack.api.wait_run(DAG_ID, skipped["dag_run_id"], timeout=180)["state"] == "success"
    done = stack.api.trigger(DAG_ID, partition_key=str(big))  # done: the gate skips it
    assert stack.api.wait_run(DAG_ID, done["dag_run_id"], timeout=180)["state"] == "success"
    token = AirflowApi(stack.target.api_url, USERNAME, PASSWORD).login()
    rows = httpx.get(f"{stack.target.api_url}/tokokita/status.json",
                     cookies={"_token": token}, timeout=30).json()
    links = {run["run_id"]: run["task"] for row in rows for run in row["airflow_runs"]}
    assert links[skipped["dag_run_id"]] == "wait_for_raw_partition"
    assert links[done["dag_run_id"]] == "check_watermark"
    log = stack.task_log(skipped["dag_run_id"], "wait_for_raw_partition")
    assert f"pesanan_{missing}.csv" in log
