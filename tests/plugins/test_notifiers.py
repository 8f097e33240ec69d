"""The alerts through Airflow notifiers, from real task execution (`dag.test()`), received by
a real SMTP server (aiosmtpd, through the SMTP provider's `SmtpNotifier` and an Airflow
connection) and a real HTTP server (`ping_url`, the `PingNotifier`): a failure for good, a
success after a failure (recovered) and the deadline alert as the triggerer runs it."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.airflow_support import fire_time
from tests.ping_server import PingServer
from tests.smtp_server import SmtpServer

pytestmark = pytest.mark.airflow

SMTP_NOTIFIER = "airflow.providers.smtp.notifications.smtp.SmtpNotifier"
MAIL = {"class": SMTP_NOTIFIER,
        "kwargs": {"smtp_conn_id": "tokokita_smtp", "to": "data-team@tokokita.test",
                   "subject": "{{ tokokita_alert.subject }}",
                   "html_content": "{{ tokokita_alert.line }}"}}
NO_KOTA = ("order_id,order_ts,customer_id,produk,qty,harga_satuan,diskon\n"
           "1,2026-11-03T10:00:00+07:00,c1,teh,1,1000,0\n")


@pytest.fixture
def smtp(monkeypatch):
    server = SmtpServer().start()
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_SMTP", server.connection_uri())
    yield server
    server.stop()


def notifiers(monkeypatch, *specs) -> None:
    monkeypatch.setenv("TOKOKITA_NOTIFIERS", json.dumps(list(specs)))


def manifest(project, day: str) -> dict:
    return json.loads(project.manifests(day)[-1].read_text())


def test_a_failure_for_good_is_mailed_by_the_smtp_notifier_and_pinged_as_fail(
        project, run_dag, smtp, pings, monkeypatch):
    notifiers(monkeypatch, MAIL)
    (project.raw / "pesanan_2026-11-03.csv").write_text(NO_KOTA)
    dr, states = run_dag(fire_time("2026-11-03"))
    assert dr.state == "failed", states
    (mail,) = smtp.mails()
    assert mail.recipients == ("data-team@tokokita.test",)
    assert mail.sender == "etl@tokokita.test"
    assert mail.subject == "[orders] 2026-11-03 failed"
    body = json.loads(mail.text)
    assert body == manifest(project, "2026-11-03")["summary"]
    assert body["status"] == "failed" and "kota" in body["error"]
    assert dr.run_id in body["trigger"]
    assert pings.paths() == ["/ping/abc/start", "/ping/abc/fail"]


def test_a_success_after_a_failure_is_mailed_as_recovered_and_a_plain_success_is_not(
        project, run_dag, smtp, pings, monkeypatch):
    notifiers(monkeypatch, MAIL)
    good = (project.raw / "pesanan_2026-11-03.csv").read_text()
    (project.raw / "pesanan_2026-11-03.csv").write_text(NO_KOTA)
    failed, _ = run_dag(fire_time("2026-11-03"))
    assert failed.state == "failed"
    (project.raw / "pesanan_2026-11-03.csv").write_text(good)
    fixed, states = run_dag(None, partition_key="2026-11-03")
    assert fixed.state == "success", states
    first, recovered = smtp.mails()
    assert first.subject == "[orders] 2026-11-03 failed"
    assert recovered.subject == \
        "[orders] 2026-11-03 recovered: succeeded after a failure"
    body = json.loads(recovered.text)
    assert body == manifest(project, "2026-11-03")["summary"]
    assert (body["status"], fixed.run_id in body["trigger"]) == ("success", True)
    # a forced re-run of the now good date, and a first success of another date: no mail
    again, _ = run_dag(None, partition_key="2026-11-03", conf={"force": True})
    other, _ = run_dag(fire_time("2026-11-02"))
    assert (again.state, other.state) == ("success", "success")
    assert len(smtp.mails()) == 2
    assert pings.paths() == ["/ping/abc/start", "/ping/abc/fail"] + [
        "/ping/abc/start", "/ping/abc"] * 3


def test_a_retried_failure_inside_one_run_is_no_recovery(project, run_dag, smtp, monkeypatch):
    """Only a failure alerted before (another run's outcome) makes a success a recovery."""
    from tokokita_etl.runner.notify import recovered_from

    notifiers(monkeypatch, MAIL)
    dr, _ = run_dag(fire_time("2026-11-02"))
    assert dr.state == "success"
    trigger = manifest(project, "2026-11-02")["summary"]["trigger"]
    own_failure = {"status": "failed", "summary": {"trigger": trigger, "status": "failed"}}
    newest_first = [json.loads(p.read_text()) for p in reversed(project.manifests("2026-11-02"))]
    assert recovered_from([newest_first[0], own_failure], trigger) is None
    assert smtp.mails() == []


def test_a_notifier_that_fails_is_logged_and_the_run_and_the_other_notifiers_go_on(
        project, run_dag, smtp, monkeypatch, capsys):
    notifiers(monkeypatch,
              {"class": "tokokita_airflow.no_such_module.Notifier", "on": ["success"]},
              {**MAIL, "on": ["success"]})
    dr, states = run_dag(fire_time("2026-11-02"))
    assert dr.state == "success", states
    (mail,) = smtp.mails()
    assert mail.subject == "[orders] 2026-11-02 succeeded"
    assert ("notifier tokokita_airflow.no_such_module.Notifier failed for the success alert "
            "of 2026-11-02 (cannot import tokokita_airflow.no_such_module.Notifier (No module "
            "named 'tokokita_airflow.no_such_module')); the run goes on") in capsys.readouterr().out


def triggerer_context(run_type: str, queued_at: str) -> dict:
    """The context Airflow's triggerer gives a deadline callback (3.3: dag_run, deadline)."""
    return {"dag_run": {"dag_id": "tokokita_orders_daily",
                        "run_id": "scheduled__2026-11-03T19:30:00+00:00",
                        "logical_date": "2026-11-03T19:30:00+00:00", "run_type": run_type,
                        "partition_key": "2026-11-03", "state": "running",
                        "queued_at": queued_at},
            "deadline": {"deadline_time": "2026-11-03T23:00:00+00:00"}}


#: what the DAG file gives the deadline callback from the settings (the defaults here)
DEADLINE_SETTINGS = {"tz": "Asia/Jakarta", "deadline_local_time": "06:00",
                     "pipeline": "orders"}


def test_the_deadline_alert_posts_the_webhook_and_mails_the_notifiers(smtp, monkeypatch):
    from tokokita_airflow.notifiers import deadline_alert

    hook = PingServer().start()
    try:
        line = asyncio.run(deadline_alert(
            **DEADLINE_SETTINGS, dag_id="tokokita_orders_daily", webhook_url=f"{hook.url}/deadline",
            notifiers=json.dumps([MAIL]),
            context=triggerer_context("scheduled", "2026-11-03T19:30:02+00:00")))
        broken = asyncio.run(deadline_alert(
            **DEADLINE_SETTINGS, dag_id="tokokita_orders_daily",
            notifiers='[{"class": "tokokita_airflow.nothing.N"}]',
            context=triggerer_context("scheduled", "2026-11-03T19:30:02+00:00")))
        skipped = asyncio.run(deadline_alert(
            **DEADLINE_SETTINGS, dag_id="tokokita_orders_daily", webhook_url=f"{hook.url}/deadline",
            notifiers=json.dumps([MAIL]),
            context=triggerer_context("backfill", "2026-11-03T19:30:02+00:00")))
    finally:
        hook.stop()
    message = json.loads(line)
    assert message["partition_date"] == "2026-11-03"
    assert "notifier_errors" not in message
    assert "not_alerted" in json.loads(skipped)
    assert json.loads(broken)["notifier_errors"] == ["tokokita_airflow.nothing.N"]
    assert hook.paths() == ["/deadline"]
    (mail,) = smtp.mails()
    assert mail.subject == "[orders] 2026-11-03 missed its deadline"
    assert json.loads(mail.text) == json.loads(hook.received[0].body) == message


def test_the_dag_deadline_callback_carries_the_notifiers_setting(daily_dag, monkeypatch):
    """The DAG file reads `TOKOKITA_NOTIFIERS` when parsed and hands it to its callback."""
    callback = daily_dag.deadline[0].callback if isinstance(daily_dag.deadline, list) \
        else daily_dag.deadline.callback
    assert callback.path == "tokokita_airflow.notifiers.deadline_alert"
    assert callback.kwargs["notifiers"] == ""


def test_the_ping_notifier_can_be_configured_like_any_other(project, run_dag, monkeypatch):
    """`ping_url` is a `PingNotifier`; one named in `notifiers` pings only its own events."""
    server = PingServer().start()
    try:
        monkeypatch.delenv("TOKOKITA_PING_URL", raising=False)
        notifiers(monkeypatch, {"class": "tokokita_airflow.notifiers.PingNotifier",
                                "kwargs": {"ping_url": f"{server.url}/team"},
                                "on": ["failure"]})
        (project.raw / "pesanan_2026-11-03.csv").write_text(NO_KOTA)
        failed, _ = run_dag(fire_time("2026-11-03"))
        good, _ = run_dag(fire_time("2026-11-02"))
    finally:
        server.stop()
    assert (failed.state, good.state) == ("failed", "success")
    assert server.paths() == ["/team/fail"]
    assert json.loads(server.received[0].body)["partition_date"] == "2026-11-03"
