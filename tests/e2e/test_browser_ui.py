"""The Airflow UI's gestures in a real browser, on a running Airflow.

Debian's headless Chromium (tests/browser.py), driven by Playwright, uses the UI of a
throw-away stack (`stack.ephemeral`: the compose services as local processes on PostgreSQL)
as an operator would: log in on the login page, trigger from the form with its defaults and
with a date in its *Partition Key* field, clear `load` of a succeeded run with the clear
dialog's defaults and the whole run, read the fire time in the grid and the Partition Key in
the run header, open the status page from the menu (*Browse > TokoKita status*) and follow its
links to Airflow's pages from inside the UI's iframe, read the DAG's deadline rule and the
catch-up run's deadline, and backfill a range of partition dates from the Backfill dialog
(in Asia/Jakarta and in UTC; a UI zone west of UTC shifts the range, until the zone chosen
under the UI's clock icon is UTC or the pipeline's). The browser runs in Asia/Jakarta (Airflow
3.3 shows times in the browser's zone) unless a test says otherwise; the results are checked
through the REST API, the watermark (state.json) and the gold files.

| date                 | partition                       | used for                                  |
|----------------------|---------------------------------|-------------------------------------------|
| 2026-10-31           | none                            | the Backfill dialog in UTC: Missing Runs  |
| 2026-11-01           | none                            | the Backfill dialog in UTC: Missing Runs  |
| 2026-11-02 (sample)  | data/raw, processed by its run  | clear of a succeeded run; the grid        |
| 2026-11-03 (sample)  | data/raw                        | the form with a Partition Key             |
| 2026-11-04 (sample)  | data/raw                        | Reprocess from the status page            |
| 2026-11-02 .. 11-04  | the three samples, all done     | the Backfill dialog in Jakarta: All Runs  |
| yesterday in Jakarta | 2026-11-02's rows, date changed | the form with its defaults                |

The catch-up window holds only the scheduled run of 2026-11-02; the lookback is widened so
that the gate lets that old date through. A PNG screenshot of each step goes to pytest's
temporary folder; with TOKOKITA_SAVE_SCREENSHOTS=1 the set is also copied to
docs/screenshots/ when every test of the module passed.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote
from zoneinfo import ZoneInfo

import pytest

from stack.ephemeral import DAG_ID, PASSWORD, USERNAME, EphemeralStack, fire_time
from stack.rest import TERMINAL, wait_for
from tests.e2e.ui_stack import (
    RUN_TIMEOUT_S,
    UI_TIMEOUT_MS,
    log_in,
    new_context,
    signed_in,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Locator, Page

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.browser]

#: the zone of the stacks' DAG: the pipeline's default time zone (the stacks set none)
JKT = "Asia/Jakarta"
REPO = Path(__file__).resolve().parents[2]
SAMPLE_RAW = REPO / "data" / "raw"
SAMPLE_DAYS = (date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 4))
SCHEDULED_DAY = SAMPLE_DAYS[0]  # the catch-up's only run
FORM_DAY = SAMPLE_DAYS[1]  # triggered from the form with its Partition Key
#: the dates the Backfill dialog in UTC backfills with Missing Runs: the first two have no run
UTC_RANGE = (date(2026, 10, 31), date(2026, 11, 3))
TOOLTIP_WAIT_MS = 3_000  # a hovered grid link's tooltip, before it is hovered again
CLEARED = ("load", "validate", "publish_gold")
REPROCESSED_DAY = SAMPLE_DAYS[2]  # reprocessed from the status page inside the UI
STATUS_FRAME = "iframe[title='TokoKita status']"
#: Chromium's console error for a link the iframe's sandbox blocks
BLOCKED_NAVIGATION = "Unsafe attempt to initiate navigation"


def jakarta(moment: datetime) -> datetime:
    return moment.astimezone(ZoneInfo(JKT))


def yesterday_in_jakarta() -> date:
    return jakarta(datetime.now(UTC)).date() - timedelta(days=1)


def seed(raw: Path) -> None:
    """The sample partitions, and 2026-11-02's rows as yesterday's and today's partitions.

    Today's is written too so that a trigger after Jakarta's midnight still finds its file.
    The order ids carry the date and are changed with it: the same ids in two partitions
    would be quarantined as `order_id_in_other_partition`.
    """
    for day in SAMPLE_DAYS:
        shutil.copyfile(SAMPLE_RAW / f"pesanan_{day}.csv", raw / f"pesanan_{day}.csv")
    text = (SAMPLE_RAW / f"pesanan_{SCHEDULED_DAY}.csv").read_text(encoding="utf-8")
    yesterday = yesterday_in_jakarta()
    for day in (yesterday, yesterday + timedelta(days=1)):
        assert day not in SAMPLE_DAYS
        copy = text.replace(SCHEDULED_DAY.isoformat(), day.isoformat()).replace(
            SCHEDULED_DAY.strftime("%Y%m%d"), day.strftime("%Y%m%d"))
        (raw / f"pesanan_{day}.csv").write_text(copy, encoding="utf-8")


@dataclass
class Ui:
    """The running stack and a logged-in browser page in Asia/Jakarta."""

    stack: EphemeralStack
    browser: Browser
    page: Page
    shots: Path

    @property
    def base_url(self) -> str:
        return self.stack.target.api_url

    def new_context(self, zone: str = JKT) -> BrowserContext:
        return new_context(self.browser, zone)

    def shot(self, name: str, page: Page | None = None) -> Path:
        path = self.shots / f"ui-{name}.png"
        # animations="disabled": a dialog is shot at the end of its opening animation
        (page or self.page).screenshot(path=path, animations="disabled")
        return path

    def goto(self, path: str) -> None:
        self.page.goto(self.base_url + path)

    def run_tooltip(self, run_id: str) -> Locator:
        """The grid's tooltip of run `run_id`, its link hovered until the tooltip shows. The
        grid lays itself out again as its runs arrive, and a pointer left where a link was
        shows no tooltip until it moves (seen once on a slow machine: the tooltip did not show
        in 30 s), so the pointer leaves and hovers the link again."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        link = self.page.locator(f'a[href="/dags/{DAG_ID}/runs/{run_id}/"]')
        tooltip = self.page.get_by_test_id("basic-tooltip").filter(has_text=f"Run ID: {run_id}")
        deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
        while True:
            self.page.mouse.move(0, 0)
            link.hover()
            try:
                tooltip.wait_for(state="visible", timeout=TOOLTIP_WAIT_MS)
                return tooltip
            except PlaywrightTimeout:
                if time.monotonic() > deadline:
                    raise

    def scheduled_run(self) -> dict[str, Any]:
        return next(r for r in self.stack.api.dag_runs(DAG_ID)
                    if r["run_type"] == "scheduled" and r["partition_key"] == str(SCHEDULED_DAY))

    def states(self, run_id: str) -> dict[str, str]:
        return {t: ti["state"] for t, ti in self.stack.api.task_instances(DAG_ID, run_id).items()}

    def entry(self, day: date) -> dict[str, Any]:
        return self.stack.watermark().get(str(day), {})

    def gold(self, day: date) -> Path:
        return self.stack.data / "gold" / f"summary_harian_{day}.csv"


@pytest.fixture(scope="module")
def ui(tmp_path_factory, request) -> Iterator[Ui]:
    """The running stack with the scheduled run of 2026-11-02 succeeded, and a logged-in page."""
    shots = tmp_path_factory.mktemp("screenshots")
    today = jakarta(datetime.now(UTC)).date()
    stack = EphemeralStack(
        tmp_path_factory.mktemp("browser-ui"),
        start_date=(SCHEDULED_DAY + timedelta(days=1)).isoformat(),
        end_date=fire_time(SCHEDULED_DAY).isoformat(),
        # scheduled runs older than the lookback are skipped by the gate
        tokokita_env={"TOKOKITA_LOOKBACK_DAYS": str((today - SCHEDULED_DAY).days + 7)})
    with signed_in(stack, request, seed=seed, shots=shots, shot_glob="ui-*.png") as (
            browser, page, scheduled):
        assert [(r["partition_key"], r["state"]) for r in scheduled] == [
            (str(SCHEDULED_DAY), "success")]
        yield Ui(stack, browser, page, shots)


def open_trigger_form(ui: Ui):
    """The DAG page's Trigger button: the form (a dialog), Single Run preselected."""
    from playwright.sync_api import expect

    ui.goto(f"/dags/{DAG_ID}")
    ui.page.get_by_role("button", name="Trigger").click()
    form = ui.page.get_by_role("dialog")
    expect(form.get_by_role("heading", name=re.compile(rf"^Trigger Dag -\s+{DAG_ID}$"))
           ).to_be_visible()
    expect(form.get_by_text("Run Parameters")).to_be_visible()
    return form


def open_partition_key_field(form):
    """Open the form's *Advanced Options*; its *Partition Key* text box, which Airflow 3.3
    shows for a partitioned DAG (the form asks for no logical date)."""
    from playwright.sync_api import expect

    form.get_by_role("button", name="Advanced Options").click()
    field = form.get_by_role("textbox", name="Partition Key")
    expect(field).to_be_visible()
    return field


def submit_trigger_form(ui: Ui, form) -> str:
    """Press the form's Trigger; the UI opens the new run's page. Returns its run id."""
    from playwright.sync_api import expect

    form.get_by_role("button", name="Trigger", exact=True).click()
    expect(ui.page.get_by_text("Dag run has been successfully triggered.").first).to_be_visible()
    expect(ui.page).to_have_url(re.compile(rf"/dags/{DAG_ID}/runs/manual__"))
    return unquote(ui.page.url.split("/runs/", 1)[1].split("/", 1)[0])


def expect_run_page(ui: Ui, run_id: str, states: dict[str, str]) -> None:
    """The run's page lists its task instances in the given states."""
    from playwright.sync_api import expect

    ui.goto(f"/dags/{DAG_ID}/runs/{run_id}")
    expect(ui.page.get_by_text(f"{len(states)} Task Instances")).to_be_visible()
    table = ui.page.get_by_role("table")
    for task_id, state in states.items():
        row = table.get_by_role("row").filter(
            has=ui.page.get_by_role("link", name=task_id, exact=True))
        expect(row).to_contain_text(state.capitalize())


def wrap_log_lines(ui: Ui) -> None:
    """Wrap the task log's long lines (Log Settings > Wrap) so that they show in full."""
    ui.page.get_by_role("button", name="Log Settings").click()
    ui.page.get_by_role("menuitem", name="Wrap").click()


def expect_gate_log(ui: Ui, run_id: str, day: date) -> None:
    """The log of the run's check_watermark names the date the run processes."""
    from playwright.sync_api import expect

    ui.goto(f"/dags/{DAG_ID}/runs/{run_id}/tasks/check_watermark")
    wrap_log_lines(ui)
    expect(ui.page.get_by_text(f"This manual run processes partition {day}")).to_be_visible()


def test_the_login_page_signs_in_and_the_ui_shows_jakarta_time(ui):
    from playwright.sync_api import expect

    context = ui.new_context()
    page = context.new_page()
    try:
        page.goto(ui.base_url + f"/dags/{DAG_ID}")
        expect(page).to_have_url(re.compile(r"/auth/login"))
        page.get_by_label("Username").fill(USERNAME)
        page.get_by_label("Password").fill(PASSWORD)
        ui.shot("1-login", page)
        page.get_by_role("button", name="Sign in").click()
        # back to the page asked for, signed in
        expect(page).to_have_url(re.compile(rf"/dags/{DAG_ID}$"))
        expect(page.get_by_role("heading", name=DAG_ID)).to_be_visible()
        # the time zone the UI shows times in: the browser's
        expect(page.get_by_role("button", name="+07:00")).to_be_visible()
    finally:
        context.close()


def test_the_trigger_forms_defaults_process_yesterday_in_jakarta(ui):
    from playwright.sync_api import expect

    form = open_trigger_form(ui)
    # a partitioned DAG's form asks for no logical date; its Partition Key is empty
    expect(form.get_by_text("Logical Date")).to_have_count(0)
    expect(open_partition_key_field(form)).to_have_value("")
    ui.shot("2-trigger-form-defaults")
    run_id = submit_trigger_form(ui, form)

    run = ui.stack.api.wait_run(DAG_ID, run_id, timeout=RUN_TIMEOUT_S)
    assert run["state"] == "success"
    assert (run["partition_key"], run["logical_date"]) == (None, None)
    assert "partition_date" not in run["conf"]
    # D of a manual run without a key: the day before it was queued, in Jakarta
    queued = datetime.fromisoformat(run["run_after"].replace("Z", "+00:00"))
    expected = jakarta(queued).date() - timedelta(days=1)
    assert expected in {yesterday_in_jakarta(), yesterday_in_jakarta() - timedelta(days=1)}
    states = ui.states(run_id)
    assert len(states) == 7  # not a task-less success
    assert set(states.values()) == {"success"}
    done = ui.entry(expected)
    assert (done["status"], done["attempt"]) == ("success", 1)
    assert ui.gold(expected).is_file()
    expect_run_page(ui, run_id, states)
    ui.shot("3-manual-run-succeeded")
    expect_gate_log(ui, run_id, expected)
    ui.shot("4-manual-run-processes-yesterday")


def test_the_trigger_form_with_a_partition_key_processes_that_date(ui):
    from playwright.sync_api import expect

    assert ui.entry(FORM_DAY) == {}
    form = open_trigger_form(ui)
    key = open_partition_key_field(form)
    key.fill(str(FORM_DAY))
    expect(key).to_have_value(str(FORM_DAY))
    ui.shot("5-trigger-form-partition-date")
    run_id = submit_trigger_form(ui, form)
    # the run has its key as soon as the form has created it
    assert ui.stack.api.dag_run(DAG_ID, run_id)["partition_key"] == str(FORM_DAY)

    run = ui.stack.api.wait_run(DAG_ID, run_id, timeout=RUN_TIMEOUT_S)
    assert run["state"] == "success"
    assert (run["partition_key"], run["logical_date"]) == (str(FORM_DAY), None)
    assert "partition_date" not in run["conf"]
    assert ui.states(run_id)["publish_gold"] == "success"
    done = ui.entry(FORM_DAY)
    assert (done["status"], done["attempt"]) == ("success", 1)
    assert ui.gold(FORM_DAY).is_file()
    expect_gate_log(ui, run_id, FORM_DAY)


def wait_for_the_clear(ui: Ui, run_id: str, first: str, tries_before: int,
                       tasks: tuple[str, ...]) -> dict[str, Any]:
    """The run once the clear has run `first` again (a try after `tries_before`) and the run
    and every one of `tasks` have finished."""
    unfinished = (None, "queued", "scheduled", "running", "up_for_reschedule")

    def cleared_and_done():
        tis = ui.stack.api.task_instances(DAG_ID, run_id)
        finished = ui.stack.api.dag_run(DAG_ID, run_id)
        if tis[first]["try_number"] > tries_before and finished["state"] in TERMINAL and \
                all(tis[t]["state"] not in unfinished for t in tasks):
            return finished
        return None

    return wait_for(cleared_and_done, RUN_TIMEOUT_S, 1.0, f"the cleared tasks of {run_id}")


def test_clearing_load_of_a_succeeded_run_in_the_ui_re_runs_it_with_identical_results(ui):
    from playwright.sync_api import expect

    run = ui.scheduled_run()
    run_id = run["dag_run_id"]
    assert run["state"] == "success"
    before = ui.entry(SCHEDULED_DAY)
    assert (before["status"], before["attempt"]) == ("success", 1)
    gold = ui.gold(SCHEDULED_DAY).read_bytes()

    ui.goto(f"/dags/{DAG_ID}/runs/{run_id}")
    ui.page.get_by_role("table").get_by_role("link", name="load", exact=True).click()
    expect(ui.page).to_have_url(re.compile(r"/tasks/load$"))
    # the task page has loaded its try: its log is shown
    expect(ui.page.get_by_text(f"Stage load of partition {SCHEDULED_DAY}")).to_be_visible()
    ui.page.get_by_role("button", name="Press shift+c to clear").click()
    dialog = ui.page.get_by_role("dialog")
    expect(dialog.get_by_role("heading", name=re.compile(r"^Clear Task Instance: load"))
           ).to_be_visible()
    # the dialog's defaults: Downstream preselected, so load and what follows it
    expect(dialog.get_by_text("Affected Tasks: 3")).to_be_visible()
    for task_id in CLEARED:
        expect(dialog.get_by_role("row").filter(has_text=task_id)).to_contain_text(run_id)
    ui.shot("6-clear-dialog-downstream")
    dialog.get_by_role("button", name="Confirm").click()
    expect(dialog).to_be_hidden()

    finished = wait_for_the_clear(ui, run_id, "load", 1, CLEARED)
    assert finished["state"] == "success"
    states = ui.states(run_id)
    assert {t: states[t] for t in CLEARED} == dict.fromkeys(CLEARED, "success")
    after = ui.entry(SCHEDULED_DAY)
    assert (after["status"], after["attempt"]) == ("success", 2)  # a recorded reprocess
    assert after["checksums"] == before["checksums"]
    assert ui.gold(SCHEDULED_DAY).read_bytes() == gold

    # the task page says what ran: the reprocess is in the log of the new try
    ui.page.reload()
    wrap_log_lines(ui)
    expect(ui.page.get_by_text("Success", exact=True).first).to_be_visible()
    expect(ui.page.get_by_text(
        f"clear: reprocessing {SCHEDULED_DAY}, which already succeeded").first).to_be_visible()
    ui.shot("7-cleared-load-re-ran-with-reason")


def test_clearing_the_whole_succeeded_run_in_the_ui_reprocesses_the_date(ui):
    from playwright.sync_api import expect

    run = ui.scheduled_run()
    run_id = run["dag_run_id"]
    before = ui.entry(SCHEDULED_DAY)
    gold = ui.gold(SCHEDULED_DAY).read_bytes()
    gate_tries = ui.stack.api.task_instances(DAG_ID, run_id)["check_watermark"]["try_number"]

    ui.goto(f"/dags/{DAG_ID}/runs/{run_id}")
    ui.page.get_by_role("button", name="Press shift+c to clear").click()
    dialog = ui.page.get_by_role("dialog")
    expect(dialog.get_by_role("heading", name=re.compile(r"^Clear Dag Run"))).to_be_visible()
    ui.shot("18-clear-run-dialog")
    dialog.get_by_role("button", name="Confirm").click()
    expect(dialog).to_be_hidden()

    finished = wait_for_the_clear(ui, run_id, "check_watermark", gate_tries,
                                  tuple(ui.states(run_id)))
    assert finished["state"] == "success"
    assert set(ui.states(run_id).values()) == {"success"}  # the gate reprocessed the date
    after = ui.entry(SCHEDULED_DAY)
    assert (after["status"], after["attempt"]) == ("success", before["attempt"] + 1)
    assert after["checksums"] == before["checksums"]
    assert ui.gold(SCHEDULED_DAY).read_bytes() == gold
    ui.goto(f"/dags/{DAG_ID}/runs/{run_id}/tasks/check_watermark")
    wrap_log_lines(ui)
    expect(ui.page.get_by_text(
        f"Decision: clear: reprocessing {SCHEDULED_DAY}, which already succeeded").first
    ).to_be_visible()
    ui.shot("19-cleared-run-gate-reprocesses")


def expect_partition_key_in_header(ui: Ui, run_id: str, day: date) -> None:
    """The run's page: its header's Partition Key is `day`, and it shows no Logical Date
    (Airflow's partitioned runs have none)."""
    from playwright.sync_api import expect

    ui.goto(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}")
    header = ui.page.get_by_test_id("stat")
    expect(header.filter(has=ui.page.get_by_role("heading", name="Partition Key"))
           ).to_have_text(re.compile(rf"^Partition Key\s*{day}$"))
    expect(header.filter(has=ui.page.get_by_role("heading", name="Logical Date"))
           ).to_have_count(0)


def test_a_manual_run_shows_the_partition_key_it_was_given_in_its_header(ui):
    from playwright.sync_api import expect

    [manual] = [r for r in ui.stack.api.dag_runs(DAG_ID, run_type="manual")
                if r["partition_key"] == str(FORM_DAY)]
    ui.goto(f"/dags/{DAG_ID}")
    # the grid's tooltip shows a run's id, which Airflow names for a manual run
    expect(ui.run_tooltip(manual["dag_run_id"])).to_contain_text(
        f"Run ID: {manual['dag_run_id']}")
    expect_partition_key_in_header(ui, manual["dag_run_id"], FORM_DAY)
    ui.shot("17-run-header-partition-key-manual-run")


def test_the_grid_shows_the_fire_time_in_jakarta_and_the_run_header_the_partition_key(ui):
    from playwright.sync_api import expect

    run = ui.scheduled_run()
    run_id = run["dag_run_id"]
    fired = fire_time(SCHEDULED_DAY)
    # Airflow's id of a partitioned run: its fire time in UTC, then its partition key
    assert run_id.startswith(f"scheduled__{fired.astimezone(UTC).isoformat()}__{SCHEDULED_DAY}__")
    local = jakarta(fired).strftime("%Y-%m-%d %H:%M:%S")  # 2026-11-03 02:30:00
    assert local == f"{SCHEDULED_DAY + timedelta(days=1)} 02:30:00"

    ui.goto(f"/dags/{DAG_ID}")
    tooltip = ui.run_tooltip(run_id)
    expect(tooltip).to_contain_text(f"Run ID: {run_id}")
    # the fire time (Run After) in Jakarta, its UTC value in the title
    expect(tooltip.get_by_text(local, exact=True)).to_have_attribute(
        "title", fired.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
    expect(ui.page.get_by_role("button", name="+07:00")).to_be_visible()
    ui.shot("8-grid-tooltip-partition-date")

    expect_partition_key_in_header(ui, run_id, SCHEDULED_DAY)
    ui.shot("9-run-header-partition-key")


def open_status_page_from_the_menu(ui: Ui):
    """*Browse > TokoKita status*: the status page in the UI's sandboxed iframe."""
    from playwright.sync_api import expect

    ui.goto("/")
    ui.page.get_by_role("button", name="Browse").click()
    ui.page.get_by_role("menuitem", name="TokoKita status").click()
    expect(ui.page).to_have_url(re.compile(r"/plugin/tokokita"))
    frame = ui.page.frame_locator(STATUS_FRAME)
    expect(frame.locator("#dates")).to_be_visible()
    return frame


def expect_on_run_page(ui: Ui, run_id: str, tail: str = "") -> None:
    """The top page (no status page iframe left) is the run's page (or `tail` below it)."""
    from playwright.sync_api import expect

    expect(ui.page).to_have_url(re.compile(
        rf"/dags/{DAG_ID}/runs/{re.escape(quote(run_id, safe=''))}{re.escape(tail)}$"))
    expect(ui.page.locator(STATUS_FRAME)).to_have_count(0)


def ui_deadlines(ui: Ui, run_id: str) -> dict[str, Any]:
    """The run's deadlines as Airflow's UI reads them (its Deadline badge)."""
    api = ui.stack.api
    answer = api.client.get(f"/ui/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/deadlines",
                            headers={"Authorization": f"Bearer {api.token or api.login()}"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_status_page_links_clicked_inside_the_airflow_ui_open_the_run_its_log_and_the_grid(ui):
    """Regression: inside the UI's iframe (sandboxed without allow-top-navigation) the page's
    `target='_top'` run and log links were blocked, a console error and nothing else."""
    from playwright.sync_api import expect

    run_id = ui.scheduled_run()["dag_run_id"]
    errors: list[str] = []

    def console(message) -> None:
        if message.type == "error":
            errors.append(message.text)

    ui.page.on("console", console)
    frame = open_status_page_from_the_menu(ui)
    row = frame.locator(f"#d-{SCHEDULED_DAY}")
    expect(row).to_have_attribute("data-state", "done")
    ui.shot("10-status-page-in-airflow")

    # the run link: the run's page in the UI itself, its header and task instances
    row.locator(f"a[title='{run_id}']").click()
    expect_on_run_page(ui, run_id)
    expect(ui.page.get_by_role("heading", name=run_id)).to_be_visible()
    expect(ui.page.get_by_text("7 Task Instances")).to_be_visible()
    ui.shot("11-status-run-link-opens-the-run")

    # Back returns to the status page; the log link opens the gate's log
    ui.page.go_back()
    expect(ui.page).to_have_url(re.compile(r"/plugin/tokokita"))
    row = ui.page.frame_locator(STATUS_FRAME).locator(f"#d-{SCHEDULED_DAY}")
    log = row.locator(f"a[title='{run_id}'] + a")
    expect(log).to_have_text("log check_watermark")
    log.click()
    expect_on_run_page(ui, run_id, "/tasks/check_watermark")
    expect(ui.page.get_by_role("heading", name="check_watermark")).to_be_visible()
    expect(ui.page.get_by_text(f"This scheduled run processes partition {SCHEDULED_DAY}")
           ).to_be_visible()
    ui.shot("12-status-log-link-opens-the-log")

    # the grid link: the DAG's page with its grid
    ui.page.go_back()
    ui.page.frame_locator(STATUS_FRAME).locator("#grid").click()
    expect(ui.page).to_have_url(re.compile(rf"/dags/{DAG_ID}$"))
    expect(ui.page.get_by_role("heading", name=DAG_ID)).to_be_visible()
    ui.page.remove_listener("console", console)
    assert not [e for e in errors if BLOCKED_NAVIGATION in e], errors

    # opened directly, the page is its own top: the same link is an ordinary navigation
    ui.goto("/tokokita/")
    ui.page.locator(f"#d-{SCHEDULED_DAY} a[title='{run_id}']").click()
    expect_on_run_page(ui, run_id)


def test_the_run_created_by_a_status_page_action_is_one_click_away_inside_the_ui(ui):
    from playwright.sync_api import expect

    frame = open_status_page_from_the_menu(ui)
    frame.locator(f"#reprocess-{REPROCESSED_DAY}").click()
    frame.locator("#confirm").click()
    created = frame.locator("#created")
    expect(created).to_be_visible()
    run_id = created.inner_text()
    assert run_id.startswith("manual__")
    ui.shot("13-status-run-created")
    created.click()
    expect_on_run_page(ui, run_id)
    expect(ui.page.get_by_role("heading", name=run_id)).to_be_visible()

    run = ui.stack.api.wait_run(DAG_ID, run_id, timeout=RUN_TIMEOUT_S)
    assert (run["state"], run["partition_key"], run["conf"]) == (
        "success", str(REPROCESSED_DAY), {"force": True})
    assert ui.entry(REPROCESSED_DAY)["status"] == "success"


def test_the_dag_states_its_deadline_rule_and_catch_up_and_manual_runs_have_no_deadline(ui):
    """Regression: every catch-up run showed a red Missed deadline badge, a failed manual run
    an Upcoming one, and the UI said "within 4 hours" where the docs said 3 h 30 min."""
    from playwright.sync_api import expect

    ui.goto(f"/dags/{DAG_ID}")
    ui.page.get_by_role("button", name="1 deadline").click()
    expect(ui.page.get_by_text("Must complete within")).to_have_text(
        "Must complete within 6 hours of midnight Asia/Jakarta "
        "(succeeded by 06:00 Asia/Jakarta on the fire date)")
    ui.shot("14-deadline-rule")

    # the catch-up's run was created weeks after its deadline (2026-11-03 06:00): none
    run_id = ui.scheduled_run()["dag_run_id"]
    ui.goto(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}")
    badge = ui.page.get_by_test_id("stat").filter(
        has=ui.page.get_by_role("heading", name="Deadline"))
    expect(badge).to_have_text(re.compile(r"Met$"))  # Airflow's word for "none missed"
    expect(ui.page.get_by_text(re.compile(r"Missed|Upcoming"))).to_have_count(0)
    ui.shot("15-catch-up-run-without-deadline")
    runs = ui.stack.api.dag_runs(DAG_ID)
    assert {"scheduled", "manual"} <= {r["run_type"] for r in runs}  # and the backfill's
    for run in runs:
        assert ui_deadlines(ui, run["dag_run_id"])["total_entries"] == 0, run["dag_run_id"]


def open_backfill_dialog(page: Page, base_url: str):
    """The DAG page's Trigger button, then its *Backfill* choice: the Backfill dialog."""
    from playwright.sync_api import expect

    page.goto(base_url + f"/dags/{DAG_ID}")
    page.get_by_role("button", name="Trigger").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Backfill", exact=True).click()
    expect(dialog.get_by_role("heading", name=re.compile(rf"^Run Backfill -\s+{DAG_ID}$"))
           ).to_be_visible()
    return dialog


def enter_date_range(page: Page, dialog, first: date, last: date) -> None:
    """Type the dates into the dialog's From and To pickers, as a person does (the date
    alone: From is 00:00 and To 23:59 of its day, in the UI's time zone)."""
    from playwright.sync_api import expect

    pickers = dialog.get_by_test_id("datetime-input")
    for picker, day in ((pickers.nth(0), first), (pickers.nth(1), last)):
        picker.click()
        page.get_by_role("dialog").last.get_by_placeholder("YYYY/MM/DD").fill(
            day.strftime("%Y/%m/%d"))
        page.keyboard.press("Escape")  # closes the picker, not the dialog
    expect(pickers.nth(0)).to_have_text(f"{first:%b %d, %Y} 00:00")
    expect(pickers.nth(1)).to_have_text(f"{last:%b %d, %Y} 23:59")


def choose_reprocess_behaviour(dialog, label: str) -> None:
    from playwright.sync_api import expect

    dialog.get_by_text(label, exact=True).click()
    expect(dialog.get_by_role("radio", name=label)).to_be_checked()


def run_the_backfill(ui: Ui, page: Page, dialog, runs: int) -> list[dict[str, Any]]:
    """Press *Run Backfill* once the dialog says it makes `runs` runs; wait until the backfill
    has completed. The runs it created."""
    from playwright.sync_api import expect

    before = {r["dag_run_id"] for r in ui.stack.api.dag_runs(DAG_ID, run_type="backfill")}
    expect(dialog.get_by_text(f"{runs} runs will be triggered.")).to_be_visible()
    dialog.get_by_role("button", name="Run Backfill").click()
    expect(page.get_by_text("Backfill generated").first).to_be_visible()
    expect(dialog).to_be_hidden()

    def completed() -> list[dict[str, Any]] | None:
        backfills = ui.stack.api.get("/backfills", dag_id=DAG_ID)["backfills"]
        created = [r for r in ui.stack.api.dag_runs(DAG_ID, run_type="backfill")
                   if r["dag_run_id"] not in before]
        if all(b["completed_at"] for b in backfills) and \
                all(r["state"] in TERMINAL for r in created):
            return created
        return None

    return wait_for(completed, runs * RUN_TIMEOUT_S, 1.0, "the backfill from the dialog")


def show_backfill_runs_with_their_partition_keys(page: Page, base_url: str):
    """The DAG's *Runs* tab filtered to backfill runs (*Filter > Run Type > Backfill*), its
    *Partition Key* column shown and the columns a narrow screen does not need hidden (the
    table's column menu). The runs table."""
    from playwright.sync_api import expect

    page.goto(base_url + f"/dags/{DAG_ID}/runs")
    page.get_by_role("button", name="Filter table columns").click()
    for column in ("Partition Key", "Triggering User", "Start Date", "Duration",
                   "Dag Version(s)", "Conf"):
        page.get_by_role("menuitem", name=column, exact=True).click()
    page.keyboard.press("Escape")
    expect(page.get_by_role("menu", name="Filter table columns")).to_be_hidden()
    # the runs list's own filter bar (the grid beside it has one too)
    page.locator("#details-panel").get_by_role("button", name="Filter", exact=True).click()
    page.get_by_role("menu", name="Filter", exact=True).get_by_role(
        "menuitem", name="Run Type").click()
    page.get_by_role("combobox").click()
    page.get_by_role("option", name="Backfill").click()
    page.keyboard.press("Escape")
    expect(page).to_have_url(re.compile(r"[?&]run_type=backfill"))
    page.mouse.move(0, 0)
    table = page.get_by_role("table")
    expect(table.get_by_role("columnheader", name="Partition Key")).to_be_visible()
    return table


def expect_backfill_row(page: Page, table, day: date) -> None:
    """One row of the runs table has Partition Key `day`: a successful backfill run that
    fired at D+1 02:30 (Run After, in the UI's zone: Jakarta)."""
    from playwright.sync_api import expect

    row = table.get_by_role("row").filter(has=page.get_by_role("cell", name=str(day), exact=True))
    expect(row).to_have_count(1)
    expect(row).to_contain_text(jakarta(fire_time(day)).strftime("%Y-%m-%d %H:%M:%S"))
    expect(row).to_contain_text("Success")
    expect(row).to_contain_text("Backfill")


def test_the_backfill_dialog_reprocesses_exactly_the_partition_dates_of_its_range(ui):
    """All Runs from 2026-11-02 to 2026-11-04, typed as dates in the dialog in Jakarta: one
    backfill run per date, its Partition Key that date, each a reprocess (Clear semantics)
    with the checksums and gold bytes of the unchanged partition."""
    from playwright.sync_api import expect

    before = {day: ui.entry(day) for day in SAMPLE_DAYS}
    assert {e["status"] for e in before.values()} == {"success"}  # done by the earlier tests
    gold = {day: ui.gold(day).read_bytes() for day in SAMPLE_DAYS}

    dialog = open_backfill_dialog(ui.page, ui.base_url)
    enter_date_range(ui.page, dialog, SAMPLE_DAYS[0], SAMPLE_DAYS[-1])
    choose_reprocess_behaviour(dialog, "All Runs")
    expect(dialog.get_by_text("3 runs will be triggered.")).to_be_visible()
    ui.shot("20-backfill-dialog-partition-dates")
    created = run_the_backfill(ui, ui.page, dialog, runs=3)

    assert sorted(r["partition_key"] for r in created) == [str(d) for d in SAMPLE_DAYS]
    for run in created:
        day = date.fromisoformat(run["partition_key"])
        assert run["state"] == "success", (day, ui.states(run["dag_run_id"]))
        assert datetime.fromisoformat(run["run_after"].replace("Z", "+00:00")) == fire_time(day)
        assert run["logical_date"] is None and "partition_date" not in run["conf"]
        assert ui.states(run["dag_run_id"])["publish_gold"] == "success"
        after = ui.entry(day)
        assert (after["status"], after["attempt"]) == ("success", before[day]["attempt"] + 1)
        assert after["checksums"] == before[day]["checksums"]
        assert ui.gold(day).read_bytes() == gold[day]

    table = show_backfill_runs_with_their_partition_keys(ui.page, ui.base_url)
    expect(table.get_by_role("row")).to_have_count(1 + len(SAMPLE_DAYS))  # and the header
    for day in SAMPLE_DAYS:
        expect_backfill_row(ui.page, table, day)
    ui.shot("21-backfill-runs-partition-keys")
    [first] = [r for r in created if r["partition_key"] == str(SAMPLE_DAYS[0])]
    expect_partition_key_in_header(ui, first["dag_run_id"], SAMPLE_DAYS[0])
    ui.shot("17-run-header-partition-key-backfill-run")


def test_the_backfill_dialog_in_utc_gives_a_run_to_exactly_the_dates_of_its_range_without_one(ui):
    """Missing Runs (the dialog's default) from 2026-10-31 to 2026-11-03 in a browser in UTC:
    runs for 10-31 and 11-01 (no partition file: their sensors skip, nothing is recorded),
    none for 11-02 and 11-03, which have runs."""
    from playwright.sync_api import expect

    first, last = UTC_RANGE
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    with_runs = {r["partition_key"] for r in ui.stack.api.dag_runs(DAG_ID)}
    assert [str(d) in with_runs for d in days] == [False, False, True, True]
    marks = ui.stack.watermark()

    context = ui.new_context("UTC")
    page = context.new_page()
    try:
        log_in(page, ui.base_url)
        expect(page.get_by_role("button", name="+00:00")).to_be_visible()
        dialog = open_backfill_dialog(page, ui.base_url)
        enter_date_range(page, dialog, first, last)
        expect(dialog.get_by_role("radio", name="Missing Runs")).to_be_checked()
        created = run_the_backfill(ui, page, dialog, runs=2)
    finally:
        context.close()

    assert sorted(r["partition_key"] for r in created) == [str(d) for d in days[:2]]
    for run in created:
        assert run["state"] == "success"
        assert ui.states(run["dag_run_id"])["wait_for_raw_partition"] == "skipped"
    assert ui.stack.watermark() == marks


def dialog_partition_keys(page: Page, base_url: str, first: date, last: date) -> list[str]:
    """The partition keys of the runs the Backfill dialog says it would create for All Runs
    over first..last (its preview: the dry run it asks Airflow for, whose count it shows)."""
    from playwright.sync_api import expect

    dialog = open_backfill_dialog(page, base_url)
    choose_reprocess_behaviour(dialog, "All Runs")

    def preview(response) -> bool:
        body = response.request.post_data or ""
        return response.url.endswith("/backfills/dry_run") and '"to_date":"2' in body

    with page.expect_response(preview) as answer:
        enter_date_range(page, dialog, first, last)
    keys = [run["partition_key"] for run in answer.value.json()["backfills"]]
    expect(dialog.get_by_text(f"{len(keys)} runs will be triggered.")).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    return keys


def test_the_backfill_dialog_west_of_utc_shifts_its_range_until_the_ui_zone_is_the_pipelines(ui):
    """Airflow 3.3's dialog sends From and To as the midnight and the end of the typed days in
    the UI's time zone, and Airflow reads a partitioned backfill's bounds by their wall clock
    in the DAG's zone: in a UI zone west of UTC the range is one day later. docs/operations.md
    says so and what to do (choose the pipeline's zone or UTC under the UI's clock icon);
    should this fail, Airflow has changed and that note must change with it."""
    from playwright.sync_api import expect

    typed = [str(d) for d in SAMPLE_DAYS]
    context = ui.new_context("America/New_York")
    page = context.new_page()
    try:
        log_in(page, ui.base_url)
        shifted = dialog_partition_keys(page, ui.base_url, SAMPLE_DAYS[0], SAMPLE_DAYS[-1])
        assert shifted == [str(d + timedelta(days=1)) for d in SAMPLE_DAYS]
        page.get_by_role("button", name="-05:00").click()  # the clock icon: Select Timezone
        page.get_by_role("dialog").get_by_role("combobox").fill(JKT)
        page.keyboard.press("Enter")
        page.keyboard.press("Escape")
        expect(page.get_by_role("button", name="+07:00")).to_be_visible()
        assert dialog_partition_keys(page, ui.base_url, SAMPLE_DAYS[0], SAMPLE_DAYS[-1]) == typed
    finally:
        context.close()
