"""The warehouse connection edited in Admin > Connections, in a real browser, on a running Airflow.

Debian's headless Chromium (tests/browser.py), driven by Playwright, uses the UI of a throw-away
stack (`stack.ephemeral`) as a person would: *Admin > Connections* lists `tokokita_warehouse`
(added to the metadata database by airflow-init, as on `make up`), the form shows it as a
Postgres connection with its fields and offers the Postgres and Sqlite types, and its Test
button answers. The warehouse database lives on a PostgreSQL server that checks passwords
(`password_postgres`). The person changes the password in the form and saves it; Test fails;
the next run, triggered from the trigger form, fails at once in its gate `check_watermark`
(the first task that opens the warehouse), whose log (read in the UI, from the grid and from
the status page's link) gives the detail in one line and ends with the refusal, one sentence
naming the connection and what to do; the password is in no page, file or manifest.
The person sets the password back: Test succeeds and the next run of the date succeeds.

| date       | partition          | used for                                          |
|------------|--------------------|---------------------------------------------------|
| 2026-11-02 | data/raw (sample)  | the scheduled run: the connection as added works  |
| 2026-11-03 | data/raw (sample)  | the run after the edit (fails), then after the fix |

A PNG screenshot of each step goes to pytest's temporary folder; with
TOKOKITA_SAVE_SCREENSHOTS=1 the set is also copied to docs/screenshots/ when every test of
the module passed.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote
from zoneinfo import ZoneInfo

import pytest

from stack.ephemeral import DAG_ID, EphemeralStack, fire_time
from tests.e2e.ui_stack import RUN_TIMEOUT_S, signed_in

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.browser]

JKT = "Asia/Jakarta"
REPO = Path(__file__).resolve().parents[2]
SCHEDULED_DAY, EDITED_DAY = date(2026, 11, 2), date(2026, 11, 3)
CONN_ID = "tokokita_warehouse"
GATE = "check_watermark"  # the first task that opens the warehouse (its identity)
STATUS_FRAME = "iframe[title='TokoKita status']"
WRONG_PASSWORD = "wr0ng-Form-9Tq4"


@dataclass
class Ui:
    """The running stack, a logged-in page and the right password of the warehouse."""

    stack: EphemeralStack
    page: Page
    shots: Path
    right_password: str

    @property
    def base_url(self) -> str:
        return self.stack.target.api_url

    def shot(self, name: str) -> Path:
        path = self.shots / f"connections-{name}.png"
        self.page.screenshot(path=path, animations="disabled")
        return path

    def goto(self, path: str) -> None:
        self.page.goto(self.base_url + path)

    def states(self, run_id: str) -> dict[str, str]:
        return {t: ti["state"] for t, ti in self.stack.api.task_instances(DAG_ID, run_id).items()}


@pytest.fixture(scope="module")
def ui(tmp_path_factory, request, password_postgres) -> Iterator[Ui]:
    """The running stack with the scheduled run of SCHEDULED_DAY succeeded, and a logged-in
    page."""
    shots = tmp_path_factory.mktemp("screenshots")
    today = datetime.now(UTC).astimezone(ZoneInfo(JKT)).date()
    stack = EphemeralStack(
        tmp_path_factory.mktemp("browser-connections"),
        start_date=(SCHEDULED_DAY + timedelta(days=1)).isoformat(),
        end_date=fire_time(SCHEDULED_DAY).isoformat(),
        # scheduled runs older than the lookback are skipped by the gate
        tokokita_env={"TOKOKITA_LOOKBACK_DAYS": str((today - SCHEDULED_DAY).days + 7)},
        warehouse_server=password_postgres.url())

    def seed(raw: Path) -> None:
        for day in (SCHEDULED_DAY, EDITED_DAY):
            shutil.copyfile(REPO / "data" / "raw" / f"pesanan_{day}.csv",
                            raw / f"pesanan_{day}.csv")

    with signed_in(stack, request, seed=seed, shots=shots, shot_glob="connections-*.png") as (
            _, page, scheduled):
        assert [r["state"] for r in scheduled] == ["success"]
        yield Ui(stack, page, shots, password_postgres.password)


def open_connections(ui: Ui) -> Locator:
    """*Admin > Connections* from the menu; returns the warehouse connection's row."""
    from playwright.sync_api import expect

    ui.goto("/")
    ui.page.get_by_role("button", name="Admin").click()
    ui.page.get_by_role("menuitem", name="Connections").click()
    expect(ui.page).to_have_url(re.compile(r"/connections$"))
    row = ui.page.get_by_role("row").filter(has=ui.page.get_by_text(CONN_ID, exact=True))
    expect(row).to_be_visible()
    return row


def open_edit_form(ui: Ui, row: Locator) -> Locator:
    """The row's Edit button: the connection's form (a dialog)."""
    from playwright.sync_api import expect

    row.get_by_role("button", name="Edit Connection").click()
    form = ui.page.get_by_role("dialog")
    expect(form.get_by_role("heading", name="Edit Connection")).to_be_visible()
    return form


def save_password(ui: Ui, password: str, shot: str) -> None:
    """Edit the connection: type `password` into the form's Password field and Save."""
    from playwright.sync_api import expect

    form = open_edit_form(ui, open_connections(ui))
    form.get_by_label("Password").fill(password)
    ui.shot(shot)
    form.get_by_role("button", name="Save").click()
    expect(ui.page.get_by_text("Connection has been successfully updated.")).to_be_visible()
    expect(form).to_be_hidden()


def press_test(ui: Ui, outcome: str, shot: str) -> str:
    """The row's Test Connection button; returns the message of the toast it shows."""
    from playwright.sync_api import expect

    row = open_connections(ui)
    row.get_by_role("button", name="Test Connection").click()
    toast = ui.page.locator("[data-scope=toast][data-part=root]").filter(has_text=outcome)
    expect(toast).to_be_visible()
    ui.shot(shot)
    return toast.inner_text()


def trigger(ui: Ui, day: date) -> str:
    """The DAG's trigger form with `day` as its Partition Key; returns the new run's id."""
    from playwright.sync_api import expect

    ui.goto(f"/dags/{DAG_ID}")
    ui.page.get_by_role("button", name="Trigger").click()
    form = ui.page.get_by_role("dialog")
    expect(form.get_by_text("Run Parameters")).to_be_visible()
    form.get_by_role("button", name="Advanced Options").click()  # where the key is typed
    form.get_by_label("Partition Key").fill(str(day))
    form.get_by_role("button", name="Trigger", exact=True).click()
    expect(ui.page).to_have_url(re.compile(rf"/dags/{DAG_ID}/runs/manual__"))
    return unquote(ui.page.url.split("/runs/", 1)[1].split("/", 1)[0])


def task_log(ui: Ui, run_id: str, task_id: str) -> None:
    """The run's page, then the task's link: its log, long lines wrapped."""
    from playwright.sync_api import expect

    ui.goto(f"/dags/{DAG_ID}/runs/{run_id}")
    ui.page.get_by_role("table").get_by_role("link", name=task_id, exact=True).click()
    expect(ui.page).to_have_url(re.compile(rf"/tasks/{task_id}$"))
    ui.page.get_by_role("button", name="Log Settings").click()
    ui.page.get_by_role("menuitem", name="Wrap").click()


def expect_the_refusal_at_the_logs_end(ui: Ui) -> None:
    """The task log's last entry is Airflow's account of the failure, whose summary line is
    the refusal: the connection and what to do; its traceback holds Airflow's frames and the
    operator's `execute` only (no frame of the code below it)."""
    from playwright.sync_api import expect

    sentence = (f"ConnectionProblem: Airflow connection '{CONN_ID}': the database refused its "
                "login: correct its login or password")
    summary = ui.page.locator("summary").filter(has_text=sentence)
    expect(summary).to_have_count(1)
    expect(summary).to_be_visible()
    entries = ui.page.locator("summary")
    assert entries.last.inner_text().strip() in (sentence, "Post Execute"), \
        entries.all_inner_texts()
    expect(ui.page.get_by_text("connections.py")).to_have_count(0)
    expect(ui.page.get_by_text("operators.py")).to_have_count(1)  # execute's raise


def test_admin_connections_lists_the_warehouse_connection_with_its_postgres_form(ui):
    from playwright.sync_api import expect

    row = open_connections(ui)
    expect(row).to_contain_text("postgres")
    expect(row).to_contain_text(str(ui.stack.connections[CONN_ID].port))
    ui.shot("1-list")
    form = open_edit_form(ui, row)
    expect(form.get_by_text("Postgres", exact=True)).to_be_visible()  # the conn type's form
    expect(form.get_by_label("Database")).to_have_value(ui.stack.warehouse_db)
    expect(form.get_by_label("Login")).to_have_value("tokokita_etl")
    expect(form.get_by_label("Password")).to_have_value("***")  # never the password itself
    ui.shot("2-edit-form")
    form.get_by_role("button", name="Close").click()
    expect(form).to_be_hidden()
    # a new connection's form offers the warehouse's conn types (the providers are installed)
    ui.page.get_by_role("button", name="Add Connection").click()
    form = ui.page.get_by_role("dialog")
    form.get_by_role("combobox").click()
    for conn_type in ("Postgres", "Sqlite"):
        expect(ui.page.get_by_role("option", name=conn_type, exact=True)).to_be_visible()
    ui.shot("3-conn-types")
    ui.page.get_by_role("option", name="Sqlite", exact=True).click()
    expect(form.get_by_label("Host")).to_be_visible()  # the database file's path
    form.get_by_role("button", name="Close").click()
    expect(form).to_be_hidden()
    assert "successfully tested" in press_test(ui, "Test Connection Successful", "4-test-ok")


def test_a_wrong_password_saved_in_the_form_fails_the_next_run_at_once_naming_it(ui):
    from playwright.sync_api import expect

    save_password(ui, WRONG_PASSWORD, "5-wrong-password")
    message = press_test(ui, "Test Connection Failed", "6-test-failed")
    assert "password authentication failed" in message
    run_id = trigger(ui, EDITED_DAY)
    run = ui.stack.api.wait_run(DAG_ID, run_id, timeout=RUN_TIMEOUT_S)
    assert run["state"] == "failed"
    states = ui.states(run_id)
    assert [t for t, s in states.items() if s == "failed"] == [GATE], states
    assert [t["state"] for t in ui.stack.api.tries(DAG_ID, run_id, GATE)] == ["failed"]
    task_log(ui, run_id, GATE)
    line = ui.page.get_by_text(
        re.compile(rf"Airflow connection '{CONN_ID}': warehouse postgresql\+psycopg://"
                   rf"tokokita_etl:\*\*\*@.*password authentication failed")).first
    expect(line).to_be_visible()
    expect_the_refusal_at_the_logs_end(ui)
    # the exception's traceback folded, as a person reading the error folds it
    ui.page.locator("summary").filter(has_text=f"Airflow connection '{CONN_ID}'").click()
    expect(ui.page.get_by_text("task_runner.py").first).to_be_hidden()
    ui.shot("7-failed-task-log")
    # the same log from the status page's link of the date's failed run
    ui.goto("/")
    ui.page.get_by_role("button", name="Browse").click()
    ui.page.get_by_role("menuitem", name="TokoKita status").click()
    row = ui.page.frame_locator(STATUS_FRAME).locator(f"#d-{EDITED_DAY}")
    log = row.locator(f"a[title='{run_id}'] + a")
    expect(log).to_have_text(f"log {GATE}")
    log.click()
    expect(ui.page).to_have_url(re.compile(rf"/tasks/{GATE}$"))
    expect_the_refusal_at_the_logs_end(ui)
    ui.page.locator("summary").filter(has_text=f"Airflow connection '{CONN_ID}'").click()
    expect(ui.page.get_by_text("task_runner.py").first).to_be_hidden()
    ui.shot("7b-failed-task-log-from-the-status-page")
    assert WRONG_PASSWORD not in ui.page.content()
    # in no file the stack wrote (logs, state, data) and no manifest
    written = [path for path in ui.stack.root.rglob("*") if path.is_file()
               and WRONG_PASSWORD.encode() in path.read_bytes()]
    assert written == []
    assert WRONG_PASSWORD not in json.dumps(ui.stack.manifests(EDITED_DAY))


def test_the_password_set_back_in_the_form_makes_the_next_run_succeed(ui):
    from playwright.sync_api import expect

    save_password(ui, ui.right_password, "8-password-set-back")
    press_test(ui, "Test Connection Successful", "9-test-ok-again")
    run_id = trigger(ui, EDITED_DAY)
    run = ui.stack.api.wait_run(DAG_ID, run_id, timeout=RUN_TIMEOUT_S)
    assert run["state"] == "success"
    assert set(ui.states(run_id).values()) == {"success"}
    ui.goto(f"/dags/{DAG_ID}/runs/{run_id}")
    expect(ui.page.get_by_text("7 Task Instances")).to_be_visible()
    # the grid: the scheduled run, the failed one and this one
    expect(ui.page.locator(f'a[href^="/dags/{DAG_ID}/runs/"][href$="/"]')).to_have_count(3)
    ui.shot("10-run-succeeded")
    assert ui.stack.manifests(EDITED_DAY)[-1]["status"] == "success"
    assert ui.stack.warehouse_dates() == {str(SCHEDULED_DAY), str(EDITED_DAY)}
