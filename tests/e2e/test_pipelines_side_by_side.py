"""A second pipeline beside the orders on a running Airflow: the stock pipeline of the tests
(`tests/stock_pipeline/`, two stages, `stok_D.csv`, `0 3 * * *`), named by
`TOKOKITA_DECLARATIONS` and given its catch-up window in config/pipeline.yaml's `pipelines:`
section, as a user would declare it. The orders reprocess a done date whose raw file changed
(`on_raw_change: reprocess`), so the sweep DAG runs too (every minute here).

Dates relative to today T in Jakarta; both catch-ups fire for T-6 and T-5.

| date | orders            | stock                                                       |
|------|-------------------|-------------------------------------------------------------|
| T-6  | done; forced again | done, untouched by the orders' forced run                  |
| T-5  | done; its raw file corrected: the sweep reprocesses it | done; its run cleared: reprocessed |
| T-4  | done (a trigger)  | a bad row: failed three times, blocked; fixed and unblocked on the status page |

Screenshots are written to docs/screenshots/ only with TOKOKITA_SAVE_SCREENSHOTS=1.
"""

from __future__ import annotations

import os
import re
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import quote
from zoneinfo import ZoneInfo

import httpx
import pytest
from stock_pipeline import STOCK

from stack.ephemeral import DAG_ID, PASSWORD, USERNAME, EphemeralStack, fire_time
from stack.rest import AirflowApi, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

JKT = "Asia/Jakarta"
STOCK_DAG = STOCK.dag_id
SWEEP_DAG = "tokokita_sweep"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
GOOD = "sku,qty\nB-2,3\nA-1,4\nB-2,1\n"
BAD = "sku,qty\nA-1,many\n"


def t(n: int) -> str:
    return str(datetime.now(UTC).astimezone(ZoneInfo(JKT)).date() - timedelta(days=n))


@pytest.fixture(scope="module")
def two_pipelines(tmp_path_factory):
    """A stack running both DAGs, their catch-ups of T-6 and T-5 finished, the stock's T-4
    blocked after three failed attempts."""
    from devtools.samples import generate_partition

    today = date.fromisoformat(t(0))
    stack = EphemeralStack(tmp_path_factory.mktemp("two-pipelines"), start_date=t(5),
                           end_date=fire_time(today - timedelta(days=5)).isoformat())
    stack.target.extra_env["TOKOKITA_DECLARATIONS"] = "stock_pipeline:STOCK"
    stack.target.extra_env["TOKOKITA_ON_RAW_CHANGE"] = "reprocess"  # the orders' own
    stack.target.extra_env["TOKOKITA_SWEEP_CRON"] = "* * * * *"
    try:
        stack.prepare()
        config = stack.home / "config"
        shutil.copytree(Path(__file__).resolve().parents[1] / "stock_pipeline",
                        config / "stock_pipeline")
        with (config / "pipeline.yaml").open("a", encoding="utf-8") as yaml:
            yaml.write(f"\npipelines:\n  stock:\n    start_date: '{t(5)}'\n"
                       f"    end_date: '{t(4)}T03:00:00+07:00'\n")
        raw = stack.data / "raw"
        for n in (6, 5, 4):
            day = today - timedelta(days=n)
            generate_partition(raw / f"pesanan_{day}.csv", day, 40, seed=n)
        for n in (6, 5):
            (raw / f"stok_{t(n)}.csv").write_text(GOOD, encoding="utf-8")
        (raw / f"stok_{t(4)}.csv").write_text(BAD, encoding="utf-8")
        stack.start()
        for dag_id in (DAG_ID, STOCK_DAG):
            stack.api.wait_dag(dag_id, timeout=120)
            wait_for(lambda dag_id=dag_id: _scheduled_finished(stack, dag_id), 240, 1,
                     f"the scheduled runs of {dag_id}")
        for _ in range(3):  # a bad row: three failed attempts of the stock's T-4
            run = _run(stack, STOCK_DAG, t(4))
            assert run["state"] == "failed", _states(stack, STOCK_DAG, run)
        yield stack
    finally:
        stack.close()


def _scheduled_finished(stack: EphemeralStack, dag_id: str) -> list[dict] | None:
    runs = [r for r in stack.api.dag_runs(dag_id) if r["run_type"] == "scheduled"]
    done = len(runs) == 2 and all(r["state"] in ("success", "failed") for r in runs)
    return runs if done else None


def _states(stack: EphemeralStack, dag_id: str, run: dict) -> dict[str, str]:
    """The states of a run's tasks, by task id."""
    return {task: ti["state"] for task, ti in
            stack.api.task_instances(dag_id, run["dag_run_id"]).items()}


def _run(stack: EphemeralStack, dag_id: str, day: str, **conf) -> dict:
    run = stack.api.trigger(dag_id, conf or None, partition_key=day)
    return stack.api.wait_run(dag_id, run["dag_run_id"], timeout=180)


def test_each_pipeline_runs_its_own_catch_up_into_its_own_watermark(two_pipelines):
    stack = two_pipelines
    for dag_id in (DAG_ID, STOCK_DAG):
        runs = _scheduled_finished(stack, dag_id)
        assert sorted(r["partition_key"] for r in runs) == [t(6), t(5)], dag_id
        last = "publish" if dag_id == STOCK_DAG else "publish_gold"
        assert [_states(stack, dag_id, r)[last] for r in runs] == ["success", "success"], runs
    orders, stock = stack.watermark(), stack.watermark(STOCK)
    assert sorted(orders) == [t(6), t(5)] and sorted(stock) == [t(6), t(5), t(4)]
    assert {orders[t(n)]["status"] for n in (6, 5)} == {stock[t(n)]["status"] for n in (6, 5)} \
        == {"success"}
    assert stock[t(4)]["status"] == "failed"
    assert stock[t(6)]["rows"] == {"extracted": 2, "summary": 2}
    assert "fact" in orders[t(6)]["rows"] and "fact" not in stock[t(6)]["rows"]
    gold = stack.data / "gold"
    assert (gold / f"stok_harian_{t(5)}.csv").read_text() == "sku,qty\nA-1,4\nB-2,4\n"
    assert (gold / f"summary_harian_{t(5)}.csv").exists()
    assert (stack.data / "state" / "stock" / "state.json").exists()


def test_a_block_a_clear_and_a_forced_run_of_one_pipeline_never_touch_the_other(two_pipelines):
    stack = two_pipelines
    blocked = _run(stack, STOCK_DAG, t(4))
    assert blocked["state"] == "failed"
    gate = stack.api.task_instances(STOCK_DAG, blocked["dag_run_id"])["check_watermark"]
    assert gate["state"] == "failed"
    assert stack.watermark(STOCK)[t(4)]["failures"] == 3
    assert _run(stack, DAG_ID, t(4))["state"] == "success"  # the orders' T-4 is not blocked
    assert stack.watermark()[t(4)]["attempt"] == 1
    assert stack.watermark(STOCK)[t(4)]["failures"] == 3

    orders_before = stack.watermark()
    [stock_t5] = [r for r in stack.api.dag_runs(STOCK_DAG)
                  if r["run_type"] == "scheduled" and r["partition_key"] == t(5)]
    stack.api.clear_task_instances(STOCK_DAG, stock_t5["dag_run_id"], ["count"],
                                   only_failed=False)
    wait_for(lambda: stack.watermark(STOCK)[t(5)]["attempt"] == 2, 180, 1,
             "the cleared stock run of T-5 to reprocess it")
    assert stack.api.wait_run(STOCK_DAG, stock_t5["dag_run_id"])["state"] == "success"
    assert stack.watermark() == orders_before  # the orders' T-5 (and every date): untouched

    stock_before = stack.watermark(STOCK)
    assert _run(stack, DAG_ID, t(6), force=True)["state"] == "success"
    assert stack.watermark()[t(6)]["attempt"] == 2
    assert stack.watermark(STOCK) == stock_before


def test_the_status_page_has_a_tab_per_pipeline_and_unblocks_the_stocks_date(two_pipelines):
    """In Chromium: Browse > TokoKita status, a tab per pipeline (the orders, the weekly and
    the monthly city reports, the stock), each with its declaration's columns; on the stock's,
    inside the UI's frame, its blocked date fixed and unblocked (Unblock, then its
    confirmation); the orders' T-4 untouched."""
    from tests.browser import chromium, open_status_page

    stack = two_pipelines
    token = AirflowApi(stack.target.api_url, USERNAME, PASSWORD).login()
    with httpx.Client(base_url=stack.target.api_url, timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as api:
        rows = {r["date"]: r for r in api.get("/tokokita/status.json",
                                                params={"pipeline": "stock"}).json()}
        assert (rows[t(4)]["state"], rows[t(5)]["state"], rows[t(6)]["state"]) == (
            "blocked", "done", "done")
        orders = {r["date"]: r["state"] for r in api.get("/tokokita/status.json").json()}
        assert (orders[t(5)], orders[t(6)]) == ("done", "done")
        unknown = api.get("/tokokita/", params={"pipeline": "nope"})
        assert unknown.status_code == 404
        assert "Unknown pipeline 'nope'; pipelines: monthly_city_report, orders, stock, " \
            "weekly_city_report" in unknown.text
    with httpx.Client(base_url=stack.target.api_url, timeout=60) as anonymous:
        for path in ("/tokokita/", "/tokokita/status.json"):  # no name told before a login
            answer = anonymous.get(path, params={"pipeline": "nope"})
            assert answer.status_code in (401, 303) and "stock" not in answer.text, path

    (stack.data / "raw" / f"stok_{t(4)}.csv").write_text(GOOD, encoding="utf-8")  # the fix
    save = os.environ.get("TOKOKITA_SAVE_SCREENSHOTS") == "1"
    with chromium() as browser:
        context, page, frame = open_status_page(browser, stack.target.api_url, token)
        assert frame.locator("#pipelines a").all_inner_texts() == [
            "orders", "weekly_city_report", "monthly_city_report", "stock"]
        assert frame.locator("h1").inner_text() == "TokoKita orders: state of each date"
        columns = {}  # each tab's, as its declaration has them
        for pipeline in ("orders", "weekly_city_report", "monthly_city_report", "stock"):
            tab = frame.locator(f"#tab-{pipeline}")
            if tab.get_attribute("aria-current") != "page":  # the tab shown is not reopened
                tab.click()
                frame.locator(f"#tab-{pipeline}[aria-current=page]").wait_for()
            frame.locator("h1", has_text=f"TokoKita {pipeline}").wait_for()
            columns[pipeline] = frame.locator("#dates th").all_inner_texts()
            if save and pipeline != "stock":
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=SCREENSHOTS / f"status-tab-{pipeline}.png")
        first, last = ["date", "state", "why", "attempts"], ["duration", "Airflow runs", "action"]
        assert columns == {
            "orders": [*first, "extracted", "fact", "karantina", "duplikat", "quarantine",
                       "bruto", "bersih", *last],
            "weekly_city_report": [*first, "days", "missing", "kota", "bruto", "bersih", *last],
            "monthly_city_report": [*first, "days", "missing", "kota", "bruto", "bersih", *last],
            "stock": [*first, "extracted", *last]}
        assert frame.locator(f"#d-{t(4)}").get_attribute("data-state") == "blocked"
        assert frame.locator(f"#d-{t(5)}").get_attribute("data-state") == "done"
        assert frame.locator("#chart").count() == 0  # the stock records no orders figures
        if save:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SCREENSHOTS / "status-two-pipelines.png")
        orders_t4 = stack.watermark()[t(4)]
        # as a person does it: Unblock and its confirmation inside the UI's frame
        frame.locator(f"#unblock-{t(4)}").click()
        frame.locator("#confirm").wait_for()
        assert frame.locator("code").first.inner_text() == STOCK_DAG
        frame.locator("#confirm").click()
        frame.locator("#created").wait_for()
        run_id = frame.locator("#created").inner_text()
        assert STOCK_DAG in frame.locator("#created").get_attribute("href")
        assert stack.api.wait_run(STOCK_DAG, run_id)["state"] == "success"
        frame.locator("text=Back to the status page").click()
        frame.locator(f"#d-{t(4)}").wait_for()
        assert frame.locator(f"#d-{t(4)}").get_attribute("data-state") == "done"
        context.close()
    assert stack.watermark()[t(4)] == orders_t4  # the orders' T-4: untouched
    entry = stack.watermark(STOCK)[t(4)]
    assert (entry["status"], entry["failures"], entry["resets"][-1]["previous_failures"]) == (
        "success", 0, 3)


def test_a_corrected_raw_file_of_a_done_date_is_reprocessed_by_the_sweep_alone(two_pipelines):
    """`on_raw_change: reprocess` (the orders'): a corrected raw file of a done date is
    reprocessed without a person: the sweep DAG triggers one run of the orders DAG that shows
    the date as its partition key and why in its note; the stock's watermark is untouched,
    and the sweeps after it make no second run of the same change."""
    stack = two_pipelines
    stack.api.wait_dag(SWEEP_DAG, timeout=60)
    orders_before, stock_before = stack.watermark(), stack.watermark(STOCK)
    gold = stack.data / "gold" / f"summary_harian_{t(5)}.csv"
    gold_before = gold.read_bytes()
    raw = stack.data / "raw" / f"pesanan_{t(5)}.csv"
    text = raw.read_text(encoding="utf-8")
    raw.write_text(text + ("" if text.endswith("\n") else "\n")
                   + f"LATE-1,{t(5)}T23:00:00+07:00,C9,Bandung,Teh,2,5000,0\n",
                   encoding="utf-8")
    corrected = datetime.now(UTC)

    def swept() -> list[dict] | None:
        runs = [r for r in stack.api.dag_runs(DAG_ID) if r["dag_run_id"].startswith("sweep__")]
        return runs if runs and all(r["state"] in ("success", "failed") for r in runs) else None

    [run] = wait_for(swept, 300, 2, "the sweep's run of the corrected date")
    assert (run["state"], run["partition_key"], run["run_type"]) == (
        "success", t(5), "operator_triggered"), run
    assert run["dag_run_id"].startswith(f"sweep__{t(5)}__")
    assert f"sweep: {t(5)} raw changed since processed" in run["note"]
    entry = stack.watermark()[t(5)]
    assert entry["attempt"] == orders_before[t(5)]["attempt"] + 1
    assert entry["rows"]["fact"] == orders_before[t(5)]["rows"]["fact"] + 1
    assert gold.read_bytes() != gold_before
    assert stack.watermark(STOCK) == stock_before
    assert {d: e for d, e in stack.watermark().items() if d != t(5)} == {
        d: e for d, e in orders_before.items() if d != t(5)}

    def later_sweeps() -> list[dict] | None:
        runs = [r for r in stack.api.dag_runs(SWEEP_DAG)
                if r["state"] == "success" and r["start_date"]
                and datetime.fromisoformat(r["start_date"]) > corrected + timedelta(minutes=1)]
        return runs if len(runs) >= 2 else None

    # as a person finds it: the run's page shows the date as its partition key and why
    from playwright.sync_api import expect

    from tests.browser import chromium

    token = AirflowApi(stack.target.api_url, USERNAME, PASSWORD).login()
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1500, "height": 1000})
        context.add_cookies([{"name": "_token", "value": token, "url": stack.target.api_url}])
        page = context.new_page()
        page.goto(f"{stack.target.api_url}/dags/{DAG_ID}/runs/{quote(run['dag_run_id'], safe='')}")
        header = page.get_by_test_id("stat")
        expect(header.filter(has=page.get_by_role("heading", name="Partition Key"))
               ).to_have_text(re.compile(rf"^Partition Key\s*{t(5)}$"), timeout=60_000)
        expect(page.get_by_text("raw changed since processed").first).to_be_visible()
        if os.environ.get("TOKOKITA_SAVE_SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SCREENSHOTS / "sweep-run-of-a-corrected-date.png")
        context.close()

    wait_for(later_sweeps, 240, 5, "two more sweeps")
    assert [r["dag_run_id"] for r in stack.api.dag_runs(DAG_ID)
            if r["dag_run_id"].startswith("sweep__")] == [run["dag_run_id"]]
