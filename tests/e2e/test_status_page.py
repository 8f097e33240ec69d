"""The status page (`/tokokita/`) on a running Airflow: login, permissions, actions, browser.

One throw-away stack (the compose services as local processes, PostgreSQL) with two logins of
SimpleAuthManager, `airflow` (admin) and `viewer` (viewer). Dates relative to today T in
Jakarta; the scheduled catch-up fires for T-6 and T-5 only.

| date | partition             | state on the page                                     |
|------|-----------------------|-------------------------------------------------------|
| T-1  | none                  | no row (after end_date, nothing to run)               |
| T-2  | good                  | due                                                   |
| T-3  | none                  | no row (after end_date, nothing to run)               |
| T-4  | good                  | due                                                   |
| T-5  | without `kota`        | failed by its run, then blocked; unblocked in Chromium |
| T-6  | good, run by its run  | done; its file corrected: done (changed); restored;    |
|      |                       | reprocessed through the page's action                 |

Screenshots are written to docs/screenshots/ only with TOKOKITA_SAVE_SCREENSHOTS=1.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from stack.ephemeral import DAG_ID, PASSWORD, USERNAME, EphemeralStack, fire_time
from stack.rest import AirflowApi, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

#: the zone of the stacks' DAG: the pipeline's default time zone (the stacks set none)
JKT = "Asia/Jakarta"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
NO_KOTA = ("order_id,order_ts,customer_id,produk,qty,harga_satuan,diskon\n"
           "TK-1,{day} 10:00:00,C1,Teh,1,1000,0\n")
ROUTES = ("/tokokita/", "/tokokita/status.json", "/tokokita/confirm?action=unblock&date=2026-11-02")


def today_in_jakarta() -> date:
    return datetime.now(UTC).astimezone(ZoneInfo(JKT)).date()


def t(n: int) -> str:
    return str(today_in_jakarta() - timedelta(days=n))


@pytest.fixture(scope="module")
def page_stack(tmp_path_factory):
    """The running stack: T-6 done, T-5 blocked after three failed attempts."""
    from devtools.samples import generate_partition

    today = today_in_jakarta()
    stack = EphemeralStack(
        tmp_path_factory.mktemp("status-page"), start_date=t(5),
        end_date=fire_time(today - timedelta(days=5)).isoformat(),
        extra_users={"viewer": "viewer"})
    try:
        stack.prepare()
        raw = stack.data / "raw"
        for n, rows in ((6, 60), (4, 45), (2, 50)):
            day = today - timedelta(days=n)
            generate_partition(raw / f"pesanan_{day}.csv", day, rows, seed=n)
        (raw / f"pesanan_{t(5)}.csv").write_text(NO_KOTA.format(day=t(5)))
        stack.start()
        stack.api.wait_dag(DAG_ID, timeout=120)
        wait_for(lambda: _scheduled_finished(stack), 180, 1, "the two scheduled runs")
        for _ in range(2):  # attempts 2 and 3 of T-5: blocked
            run = stack.api.trigger(DAG_ID, partition_key=t(5))
            assert stack.api.wait_run(DAG_ID, run["dag_run_id"])["state"] == "failed"
        assert stack.watermark()[t(5)]["attempt"] == 3
        yield stack
    finally:
        stack.close()


def _scheduled_finished(stack: EphemeralStack) -> bool:
    runs = [r for r in stack.api.dag_runs(DAG_ID) if r["run_type"] == "scheduled"]
    return len(runs) >= 2 and all(r["state"] in ("success", "failed") for r in runs)


def client(stack: EphemeralStack, username: str | None = None) -> httpx.Client:
    """An HTTP client of the api-server, logged in as `username` (bearer token) or not."""
    headers = {}
    if username:
        password = PASSWORD if username == USERNAME else stack.password(username)
        api = AirflowApi(stack.target.api_url, username, password)
        headers["Authorization"] = f"Bearer {api.login()}"
        api.close()
    return httpx.Client(base_url=stack.target.api_url, headers=headers, timeout=60,
                        follow_redirects=False)


def csrf_of(html: str) -> str:
    return re.search(r"name='csrf' value='([0-9a-f]+)'", html).group(1)


def test_every_route_without_a_login_is_401_or_a_redirect_to_login_and_no_docs(page_stack):
    with client(page_stack) as anonymous:
        for path in ROUTES:
            answer = anonymous.get(path)
            assert answer.status_code in (401, 303), path
            if answer.status_code == 303:
                assert "/auth/login" in answer.headers["location"], path
        assert anonymous.post("/tokokita/actions", data={
            "action": "unblock", "date": t(5)}).status_code == 401
        for path in ("/tokokita/docs", "/tokokita/redoc", "/tokokita/openapi.json"):
            assert anonymous.get(path).status_code in (401, 404), path
    with client(page_stack, USERNAME) as admin:
        for path in ("/tokokita/docs", "/tokokita/redoc", "/tokokita/openapi.json"):
            assert admin.get(path).status_code == 404, path


def test_the_page_shows_every_date_in_the_window_with_its_state(page_stack):
    with client(page_stack, USERNAME) as admin:
        rows = {r["date"]: r for r in admin.get("/tokokita/status.json").json()}
        page = admin.get("/tokokita/")
    assert page.status_code == 200
    assert rows[t(6)]["state"] == "done" and rows[t(6)]["rows"]["fact"] > 0
    assert float(rows[t(6)]["bersih"]) > 0 and rows[t(6)]["airflow_runs"][0]["state"] == "success"
    assert (rows[t(5)]["state"], rows[t(5)]["label"]) == ("blocked", "blocked 3/3")
    assert "kota" in rows[t(5)]["error"]
    assert f'partition key {t(5)} and {{"reset_attempts": true}}' in rows[t(5)]["unblock"]
    assert [r["state"] for r in rows[t(5)]["airflow_runs"]] == ["failed"] * 3
    assert rows[t(4)]["state"] == "due" and rows[t(2)]["state"] == "due"
    # after end_date (T-4 02:30) nothing schedules a date: one without its file has no row
    assert t(3) not in rows and t(1) not in rows
    html = page.text
    assert "<svg id='strip'" in html and "<svg id='chart'" in html
    assert f"id='unblock-{t(5)}'" in html and f"id='reprocess-{t(6)}'" in html
    assert "To unblock: fix the partition" in html
    # a scheduled run's id: scheduled__<fire time, UTC>__<D>__<random>
    assert re.search(rf"/dags/{DAG_ID}/runs/scheduled__[^_']+__{t(6)}__", html), html
    assert "True" not in html and "False" not in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    # one inline script (the links to Airflow's pages inside its UI), allowed by its hash alone
    (script,) = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    assert html.lower().count("<script") == 1
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}';" in page.headers["content-security-policy"]


def test_a_viewer_can_read_the_page_but_cannot_act(page_stack):
    with client(page_stack, "viewer") as viewer:
        page = viewer.get("/tokokita/")
        assert page.status_code == 200
        assert "(read only)" in page.text and "id='unblock-" not in page.text
        assert viewer.get("/tokokita/status.json").status_code == 200
        assert viewer.get("/tokokita/confirm", params={"action": "unblock", "date": t(5)}
                          ).status_code == 403
        refused = viewer.post("/tokokita/actions", data={
            "action": "unblock", "date": t(5), "csrf": "0" * 64},
            headers={"Origin": page_stack.target.api_url})
        assert refused.status_code == 403
    assert page_stack.watermark()[t(5)]["attempt"] == 3


def test_a_cross_site_post_or_one_without_the_form_token_is_refused(page_stack):
    before = len(page_stack.api.dag_runs(DAG_ID))
    with client(page_stack, USERNAME) as admin:
        confirm = admin.get("/tokokita/confirm", params={"action": "reprocess", "date": t(6)})
        assert confirm.status_code == 200
        form = {"action": "reprocess", "date": t(6), "csrf": csrf_of(confirm.text)}
        assert admin.post("/tokokita/actions", data=form, headers={
            "Origin": "http://evil.example"}).status_code == 403
        assert admin.post("/tokokita/actions", data=form).status_code == 403  # no Origin
        assert admin.post("/tokokita/actions", data={**form, "csrf": "1" * 64}, headers={
            "Origin": page_stack.target.api_url}).status_code == 403
    assert len(page_stack.api.dag_runs(DAG_ID)) == before


def test_a_done_date_whose_raw_file_changed_shows_it_on_the_page_and_in_the_gates_skip(
        page_stack):
    """`on_raw_change: flag`: a corrected raw file for a done date is shown, in Chromium on
    the page and in status.json, with the sizes; the date is not due, and a plain trigger
    skips it with the same words in the gate's log. The same bytes again (a new mtime) are
    no change."""
    from tests.browser import chromium

    stack = page_stack
    path = stack.data / "raw" / f"pesanan_{t(6)}.csv"
    original = path.read_bytes()
    late = f"TK-LATE,{t(6)}T23:00:00+07:00,C9,Bandung,Teh,2,5000,0\n".encode()
    path.write_bytes(original + late)
    change = f"raw changed since processed ({len(original)} -> {len(original) + len(late)} bytes)"
    try:
        with client(stack, USERNAME) as admin:
            row = {r["date"]: r for r in admin.get("/tokokita/status.json").json()}[t(6)]
        assert (row["state"], row["label"], row["due"]) == ("done", "done (changed)", False)
        assert row["raw_change"] == change and change in row["reason"]
        run = stack.api.trigger(DAG_ID, partition_key=t(6))
        assert stack.api.wait_run(DAG_ID, run["dag_run_id"])["state"] == "success"
        log = stack.task_log(run["dag_run_id"], "check_watermark")
        assert f"already succeeded (use force to reprocess); {change}" in log
        assert stack.watermark()[t(6)]["attempt"] == 1
        token = AirflowApi(stack.target.api_url, USERNAME, PASSWORD).login()
        with chromium() as browser:
            context = browser.new_context(viewport={"width": 1500, "height": 900})
            context.add_cookies([{"name": "_token", "value": token,
                                  "url": stack.target.api_url}])
            page = context.new_page()
            page.goto(f"{stack.target.api_url}/tokokita/")
            shown = page.locator(f"#d-{t(6)}")
            assert shown.locator("td.state").inner_text() == "done (changed)"
            assert change in shown.locator("td.why").inner_text()
            if os.environ.get("TOKOKITA_SAVE_SCREENSHOTS") == "1":
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                shown.scroll_into_view_if_needed()
                page.screenshot(path=SCREENSHOTS / "status-raw-changed.png")
            context.close()
    finally:
        path.write_bytes(original)
    with client(stack, USERNAME) as admin:
        row = {r["date"]: r for r in admin.get("/tokokita/status.json").json()}[t(6)]
    assert (row["label"], row["raw_change"]) == ("done", "")


def test_an_admins_reprocess_creates_a_forced_run_in_airflows_audit_log(page_stack):
    stack = page_stack
    with client(stack, USERNAME) as admin:
        confirm = admin.get("/tokokita/confirm", params={"action": "reprocess", "date": t(6)})
        done = admin.post("/tokokita/actions", data={
            "action": "reprocess", "date": t(6), "csrf": csrf_of(confirm.text)},
            headers={"Origin": stack.target.api_url})
    assert done.status_code == 200, done.text
    run_id = re.search(r"id='created' href='[^']*/runs/([^']+)'", done.text).group(1)
    from urllib.parse import unquote

    run = stack.api.wait_run(DAG_ID, unquote(run_id))
    assert run["state"] == "success"
    assert (run["conf"], run["partition_key"]) == ({"force": True}, t(6))
    assert stack.watermark()[t(6)]["attempt"] == 2
    logs = stack.api.get("/eventLogs", dag_id=DAG_ID, event="trigger_dag_run",
                         order_by="-when", limit=20)["event_logs"]
    assert any(e["owner"] == USERNAME and t(6) in (e.get("extra") or "") for e in logs), logs


def test_a_watermark_entry_with_rows_a_string_gets_a_503_naming_the_field_not_a_500(page_stack):
    """Regression: with a watermark entry whose `rows` is a string, `/tokokita/` answered a
    bare HTTP 500 (the watermark's StateError escaped the page) while the command line named
    the file, the date and the field."""
    state_file = page_stack.settings().state_file
    good = state_file.read_bytes()
    data = json.loads(good)
    data["runs"][t(6)]["rows"] = "8"
    state_file.write_text(json.dumps(data, indent=2), encoding="utf-8")
    try:
        with client(page_stack, USERNAME) as admin:
            for path in ("/tokokita/", "/tokokita/status.json"):
                answer = admin.get(path)
                assert answer.status_code == 503, (path, answer.status_code, answer.text)
                detail = answer.json()["detail"]
                assert str(state_file) in detail and t(6) in detail and "'rows'" in detail, detail
    finally:
        state_file.write_bytes(good)
    with client(page_stack, USERNAME) as admin:
        assert admin.get("/tokokita/").status_code == 200


def test_in_chromium_the_page_renders_in_the_airflow_ui_and_unblock_recovers_a_blocked_date(
        page_stack):
    from devtools.samples import generate_partition
    from tests.browser import chromium

    stack = page_stack
    save = os.environ.get("TOKOKITA_SAVE_SCREENSHOTS") == "1"
    day = date.fromisoformat(t(5))
    generate_partition(stack.data / "raw" / f"pesanan_{day}.csv", day, 30, seed=5)  # the fix
    token = AirflowApi(stack.target.api_url, USERNAME, PASSWORD).login()
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1500, "height": 1000})
        context.add_cookies([{"name": "_token", "value": token, "url": stack.target.api_url}])
        outside: list[str] = []
        context.on("request", lambda r: outside.append(r.url)
                   if not r.url.startswith((stack.target.api_url, f"blob:{stack.target.api_url}",
                                            "data:")) else None)
        page = context.new_page()
        page.goto(f"{stack.target.api_url}/plugin/tokokita", wait_until="networkidle")
        frame = page.frame_locator("iframe")
        frame.locator("#strip").wait_for(timeout=60_000)
        colours = frame.locator("#strip rect").evaluate_all(
            "els => els.map(e => [e.dataset.state, e.getAttribute('fill')])")
        assert ["blocked", "#c62828"] in colours and ["done", "#2e7d32"] in colours
        assert frame.locator("#chart rect.fact").count() >= 1
        assert frame.locator("#chart polyline.share").count() == 1
        assert frame.locator("#chart polyline.bersih").count() == 1
        if save:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SCREENSHOTS / "status-in-airflow.png")
        own = context.new_page()
        own.goto(f"{stack.target.api_url}/tokokita/")
        if save:
            own.screenshot(path=SCREENSHOTS / "status-page.png", full_page=True)
        own.click(f"#unblock-{day}")
        own.wait_for_selector("#confirm")
        if save:
            own.screenshot(path=SCREENSHOTS / "status-confirm.png")
        own.click("#confirm")
        own.wait_for_selector("#created")
        run_id = own.locator("#created").inner_text()
        assert stack.api.wait_run(DAG_ID, run_id)["state"] == "success"
        own.goto(f"{stack.target.api_url}/tokokita/")
        assert own.locator(f"#d-{day}").get_attribute("data-state") == "done"
        assert outside == [], outside
        context.close()
    entry = stack.watermark()[str(day)]
    # Unblock reset the failures and kept the total (three failures, then this success)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("success", 4, 0)
    assert entry["resets"][-1]["previous_failures"] == 3
    if save:
        for path in SCREENSHOTS.glob("status-*.png"):
            assert path.stat().st_size < 300_000, path
