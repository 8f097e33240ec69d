"""The status page package against real Airflow in this process: its auth manager, metadata
database and run creation (the page on a running api-server: tests/e2e/test_status_page.py)."""

from __future__ import annotations

import base64
import hashlib
import re
from urllib.parse import unquote

import pytest

from tests.airflow_support import fire_time

pytestmark = pytest.mark.airflow

DAY = "2026-11-02"


def counts() -> tuple[int, int]:
    """How many DAG runs and `trigger_dag_run` audit log entries the metadata database holds."""
    from airflow.models.dagrun import DagRun
    from airflow.models.log import Log
    from airflow.utils.session import create_session

    with create_session() as session:
        return (session.query(DagRun).count(),
                session.query(Log).filter_by(event="trigger_dag_run").count())


@pytest.fixture
def signed_in(project, run_dag):
    """A client of the page mounted at /tokokita as the api-server mounts it, and a function
    that signs it in as a SimpleAuthManager user of a role; DAY has run once (done)."""
    from airflow.api_fastapi.app import init_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from tokokita_plugin import TokokitaPlugin

    run_dag(fire_time(DAY))
    manager = init_auth_manager()
    server = FastAPI()
    server.mount("/tokokita", TokokitaPlugin.fastapi_apps[0]["app"])

    def client(username: str, role: str) -> TestClient:
        token = manager.generate_jwt(SimpleAuthManagerUser(username=username, role=role))
        return TestClient(server, follow_redirects=False,
                          headers={"Authorization": f"Bearer {token}"})

    return client


def test_a_reprocess_creates_the_run_in_process_with_airflows_audit_log_entry(signed_in):
    """Regression: the action called this server back over HTTP without certificate checks;
    the run is now created in process by Airflow's own REST trigger function."""
    from airflow.models.dagrun import DagRun
    from airflow.models.log import Log
    from airflow.utils.session import create_session

    admin = signed_in("alice", "admin")
    before = counts()
    confirm = admin.get("/tokokita/confirm", params={"action": "reprocess", "date": DAY})
    assert confirm.status_code == 200
    csrf = re.search(r"name='csrf' value='([0-9a-f]+)'", confirm.text).group(1)
    done = admin.post("/tokokita/actions", data={"action": "reprocess", "date": DAY,
                                                 "csrf": csrf},
                      headers={"Origin": "http://testserver"})
    assert done.status_code == 200, done.text
    run_id = unquote(re.search(r"id='created' href='/dags/tokokita_orders_daily/runs/([^']+)'",
                               done.text).group(1))
    with create_session() as session:
        run = session.query(DagRun).filter_by(run_id=run_id).one()
        assert (run.run_type, run.state, run.triggering_user_name, run.conf,
                run.partition_key) == ("manual", "queued", "alice", {"force": True}, DAY)
        entry = session.query(Log).filter_by(event="trigger_dag_run").order_by(
            Log.id.desc()).first()
        assert (entry.owner, entry.dag_id) == ("alice", "tokokita_orders_daily")
        assert DAY in entry.extra and '"force": true' in entry.extra
    assert counts() == (before[0] + 1, before[1] + 1)


def test_an_action_without_the_form_token_creates_no_run_and_no_audit_entry(signed_in):
    admin = signed_in("alice", "admin")
    before = counts()
    refused = admin.post("/tokokita/actions", data={"action": "reprocess", "date": DAY,
                                                    "csrf": "0" * 64},
                         headers={"Origin": "http://testserver"})
    assert refused.status_code == 403
    assert counts() == before


def test_the_page_offers_the_actions_each_state_allows_and_runs_only_its_hashed_script(
        signed_in):
    admin, viewer = signed_in("alice", "admin"), signed_in("vera", "viewer")
    rows = {r["date"]: r for r in admin.get("/tokokita/status.json").json()}
    page = admin.get("/tokokita/")
    assert page.status_code == 200 and rows[DAY]["state"] == "done"
    html = page.text
    for day, row in rows.items():
        allowed = {"done": ["reprocess"], "due": ["reprocess"], "failed": ["reprocess"],
                   "not processed": ["reprocess"], "blocked": ["unblock"]}.get(row["state"], [])
        shown = re.findall(rf"id='(reprocess|unblock)-{day}'", html)
        assert shown == allowed, (day, row["state"])
    assert f"id='reprocess-{DAY}'" in html
    (script,) = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    assert html.lower().count("<script") == 1
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}';" in page.headers["content-security-policy"]
    read_only = viewer.get("/tokokita/")
    assert "(read only)" in read_only.text and "id='reprocess-" not in read_only.text


def test_text_from_the_watermark_is_escaped_on_the_page(signed_in, project):
    """An error message holding markup shows as text: autoescaping leaves no tag of its own."""
    import json

    state = json.loads(project.state_file.read_text())
    state["runs"][DAY]["warnings"] = ["<script>alert('x')</script> & <b>bold</b>"]
    project.state_file.write_text(json.dumps(state))
    html = signed_in("alice", "admin").get("/tokokita/").text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in html
    assert html.lower().count("<script") == 1 and "<b>bold" not in html
