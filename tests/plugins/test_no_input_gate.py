"""The gate of a week whose orders dates are all missing, called as Airflow calls it: the task
fails at once (no retry, no attempt: nothing built, no report published), a `no input`
manifest is written, and the `no_input` alert reaches the notifiers: a mail through the SMTP
provider's `SmtpNotifier` (a real SMTP server) and a `/fail` ping (a real HTTP server)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException

from tests.ping_server import PingServer
from tests.smtp_server import SmtpServer
from tokokita_airflow.operators import WatermarkGateOperator
from tokokita_etl.weekly.pipeline import WEEKLY_CITY_REPORT

EMPTY = "2026-11-09"  # the project's sample dates are 11-02..11-04: this week has none
MAIL = {"class": "airflow.providers.smtp.notifications.smtp.SmtpNotifier",
        "kwargs": {"smtp_conn_id": "tokokita_smtp", "to": "data-team@tokokita.test",
                   "subject": "{{ tokokita_alert.subject }}",
                   "html_content": "{{ tokokita_alert.line }}"}}


def context(key: str) -> dict:
    dag_run = SimpleNamespace(dag_id=WEEKLY_CITY_REPORT.dag_id, run_id="manual__w",
                              run_type="manual", logical_date=None,
                              run_after=datetime.now(UTC), partition_key=key,
                              clear_number=0, conf={})
    return {"dag_run": dag_run, "params": {"force": False, "reset_attempts": False}}


@pytest.fixture
def servers(monkeypatch):
    smtp, ping = SmtpServer().start(), PingServer().start()
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_SMTP", smtp.connection_uri())
    monkeypatch.setenv("TOKOKITA_NOTIFIERS", json.dumps([MAIL]))  # default events
    monkeypatch.setenv("TOKOKITA_WEEKLY_CITY_REPORT__PING_URL", f"{ping.url}/ping/week")
    yield smtp, ping
    smtp.stop()
    ping.stop()


def test_a_week_with_no_input_fails_its_gate_and_alerts_no_input(project, servers):
    smtp, ping = servers
    gate = WatermarkGateOperator(task_id="check_watermark", pipeline=WEEKLY_CITY_REPORT)
    with pytest.raises(AirflowFailException, match=f"^{EMPTY} has no input: all 7 of its "
                                                   "orders dates"):
        gate.execute(context(EMPTY))
    state = project.root / "data" / "state" / "weekly_city_report"
    [path] = (state / "runs").glob(f"run-{EMPTY}-*.json")
    manifest = json.loads(path.read_text())
    assert (manifest["status"], manifest["attempt"]) == ("no input", 0)
    runs = json.loads((state / "state.json").read_text())["runs"] \
        if (state / "state.json").exists() else {}
    assert EMPTY not in runs  # no attempt recorded, no success
    assert not list((project.root / "data" / "gold").glob(f"summary_mingguan_{EMPTY}*"))
    (mail,) = smtp.mails()
    assert mail.subject == (f"[weekly_city_report] {EMPTY} has no input: nothing built, no "
                            "report published")
    assert json.loads(mail.text) == manifest["summary"]
    assert ping.paths() == ["/ping/week/fail"]
