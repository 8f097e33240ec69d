"""The DAG's deadline alert on a running Airflow: which runs get a deadline, and what it does.

One throw-away stack (the compose services as local processes, PostgreSQL), a local HTTP
server as `deadline_webhook_url`, a catch-up window starting yesterday and a schedule that
fires twice within the next minutes (`deadline_local_time` h:m + 3 min, today T):

| run    | fires (Jakarta)    | created                   | D's file                   | deadline  | POST |
|--------|--------------------|---------------------------|----------------------------|-----------|------|
| Y1, Y2 | yesterday h:m, +1  | at start (catch-up), long | T-2's, none: wait window   | none      | none |
|        |                    | after their deadline      | over, skipped at once      |           |      |
| A      | h:m                | about then                | T-1's, missing when A      | h:m+3 min | one  |
|        |                    |                           | looks (next look in 5 min) |           |      |
| B      | h:m + 1 min        | about then                | written once A looked: B   | h:m+3 min | none |
|        |                    |                           | processes T-1 before it    | (pruned)  |      |
| manual | once B succeeded   | with a logical date       | T-1 done: skipped by gate  | none      | none |

A's and B's deadline is the same: `deadline_local_time` on their fire date. Only for this
throw-away stack, and not from docker-compose.yaml (set after airflow-init, as they depend on
when the services start): `TOKOKITA_CRON` (two fires a minute apart), `TOKOKITA_START_DATE`
(yesterday) and `TOKOKITA_DEADLINE_LOCAL_TIME`; the webhook URL is the compose variable
`TOKOKITA_DEADLINE_WEBHOOK_URL` and the notifiers `TOKOKITA_NOTIFIERS` (an SMTP notifier to a
local aiosmtpd server, whose Airflow connection is set for this stack alone), and everything
else is the compose environment.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from stack.ephemeral import DAG_ID, EphemeralStack, db_url
from stack.rest import wait_for
from tests.e2e.e2e_report import E2E_REPORT
from tests.ping_server import PingServer
from tests.smtp_server import SmtpServer

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

#: from `start()` until the scheduler can create run A (services healthy, DAG parsed, Y1 and
#: Y2 created), about what it takes on a busy machine: A may be created late, but it must
#: have looked for its file before B fires a minute later
#: the zone of the stacks' DAG: the pipeline's default time zone (the stacks set none)
JKT = "Asia/Jakarta"
STARTUP_S = 40
#: `deadline_local_time` after A's fire time: B, firing a minute after A, has two minutes
AFTER_A = timedelta(minutes=3)
HOOK = "/deadline"
MAIL = {"class": "airflow.providers.smtp.notifications.smtp.SmtpNotifier",
        "kwargs": {"smtp_conn_id": "tokokita_smtp", "to": "data-team@tokokita.test",
                   "subject": "{{ tokokita_alert.subject }}",
                   "html_content": "{{ tokokita_alert.line }}"}}


def _fires(now: datetime) -> tuple[datetime, datetime]:
    """Fire times of A and B (Jakarta, whole minutes), in one hour of one day."""
    local = now.astimezone(ZoneInfo(JKT)) + timedelta(seconds=STARTUP_S)
    first = local.replace(second=0, microsecond=0)
    if first < local:
        first += timedelta(minutes=1)
    return first, first + timedelta(minutes=1)


def _wait_for_one_hour(now: datetime) -> float:
    """Sleep into the next hour when A and B would fall in two (returns the sleep)."""
    first, second = _fires(now)
    if first.hour == second.hour:
        return 0.0
    left = (second - timedelta(seconds=STARTUP_S) - now).total_seconds() + 1
    time.sleep(left)
    return left


def _metadata(stack: EphemeralStack, sql: str) -> list[tuple]:
    import psycopg

    conninfo = db_url(stack.metadata_db).replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, connect_timeout=10) as conn:
        return conn.execute(sql).fetchall()


def _scheduled(stack: EphemeralStack, fire: datetime) -> dict | None:
    for run in stack.api.dag_runs(DAG_ID, run_type="scheduled"):
        # a partitioned run has no logical date: it runs after its fire time
        fired = datetime.fromisoformat(run["run_after"].replace("Z", "+00:00"))
        if fired == fire:
            return run
    return None


def _ui_deadlines(stack: EphemeralStack, run_id: str) -> dict:
    """The run's deadlines as Airflow's UI reads them (its badge on the run's page)."""
    token = stack.api.token or stack.api.login()
    answer = stack.api.client.get(f"/ui/dags/{DAG_ID}/dagRuns/{run_id}/deadlines",
                                  headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _posts(server: PingServer) -> list[dict]:
    return [json.loads(r.body) for r in server.received if r.path == HOOK]


@pytest.fixture(scope="module")
def deadline_stack(tmp_path_factory):
    """The running stack, the webhook server, and A's and B's fire times and partition."""
    started = time.monotonic()
    server = PingServer().start()
    smtp = SmtpServer().start()
    stack = EphemeralStack(tmp_path_factory.mktemp("deadline"), start_date="", end_date=None,
                           tokokita_env={"TOKOKITA_DEADLINE_WEBHOOK_URL": f"{server.url}{HOOK}",
                                         "TOKOKITA_NOTIFIERS": json.dumps([MAIL])})
    # the SMTP connection (not from the compose file: the receiver is this test's)
    stack.target.extra_env["AIRFLOW_CONN_TOKOKITA_SMTP"] = smtp.connection_uri()
    waited = 0.0
    try:
        stack.prepare()  # airflow-init does not parse the DAG: its schedule is set after it
        waited = _wait_for_one_hour(datetime.now(UTC))
        fire_a, fire_b = _fires(datetime.now(UTC))
        deadline_local = (fire_a + AFTER_A).strftime("%H:%M")
        stack.target.extra_env.update({
            "TOKOKITA_CRON": f"{fire_a.minute},{fire_b.minute} {fire_a.hour} * * *",
            "TOKOKITA_START_DATE": (fire_a.date() - timedelta(days=1)).isoformat(),
            "TOKOKITA_DEADLINE_LOCAL_TIME": deadline_local})
        stack.start()
        stack.api.wait_dag(DAG_ID, timeout=120)
        E2E_REPORT["deadline_stack_healthy_s"] = stack.timings["healthy_s"]
        E2E_REPORT["deadline_dag_parsed_s_before_first_fire"] = (
            fire_a - datetime.now(UTC)).total_seconds()
        yield {"stack": stack, "server": server, "smtp": smtp, "fire_a": fire_a,
               "fire_b": fire_b,
               "day": fire_a.date() - timedelta(days=1), "deadline_local": deadline_local}
    finally:
        stack.close()
        server.stop()
        smtp.stop()
        E2E_REPORT["deadline_e2e_wall_s"] = time.monotonic() - started - waited


def test_a_run_that_misses_its_deadline_is_posted_one_that_succeeds_before_it_is_not(
        deadline_stack):
    from devtools.samples import generate_partition

    stack, server = deadline_stack["stack"], deadline_stack["server"]
    fire_a, fire_b, day = deadline_stack["fire_a"], deadline_stack["fire_b"], deadline_stack["day"]
    # deadline_local_time on the fire date, for both
    deadline_a = deadline_b = fire_a + AFTER_A

    # A looks for D's file, which is not there, and waits (reschedule: it looks again in 5 min)
    def a_waits():
        run = _scheduled(stack, fire_a)
        if not run:
            return None
        sensor = stack.api.task_instances(DAG_ID, run["dag_run_id"]).get("wait_for_raw_partition")
        return run if sensor and sensor["state"] == "up_for_reschedule" else None

    timeout = max(10.0, (fire_b - datetime.now(UTC)).total_seconds())
    run_a = wait_for(a_waits, timeout, 1, "run A's sensor to have looked for the file before "
                                          "run B fires (the machine is too slow for this test)")
    assert run_a["partition_key"] == day.isoformat()
    # the file arrives after A looked: B, firing next, processes D before its deadline
    generate_partition(stack.data / "raw" / f"pesanan_{day}.csv", day, 40, seed=11)
    run_b = wait_for(lambda: _scheduled(stack, fire_b), 120, 1, "run B to be created")
    run_b = stack.api.wait_run(DAG_ID, run_b["dag_run_id"], timeout=240)
    assert run_b["state"] == "success"
    ended_b = datetime.fromisoformat(run_b["end_date"].replace("Z", "+00:00"))
    assert ended_b <= deadline_b, f"run B succeeded at {ended_b}, after its deadline {deadline_b}"
    assert stack.watermark()[day.isoformat()]["status"] == "success"

    # A's deadline passes while A still waits: the triggerer POSTs it
    left = (deadline_a - datetime.now(UTC)).total_seconds()
    assert server.wait_for(lambda got: any(r.path == HOOK for r in got), left + 90), (
        "no deadline webhook call within 90 s of run A's deadline\n" + stack.stack.log_tail())
    (post,) = _posts(server)
    assert post["event"] == "tokokita_deadline_missed"
    assert post["dag_id"] == DAG_ID
    assert post["run_id"] == run_a["dag_run_id"]
    assert post["partition_date"] == day.isoformat()
    assert datetime.fromisoformat(post["deadline_time"]) == deadline_a
    assert post["deadline_local_time"] == f"{deadline_stack['deadline_local']} {JKT}"
    assert post["logical_date"] is None  # a partitioned run has none
    assert datetime.fromisoformat(post["run_after"].replace("Z", "+00:00")) == fire_a
    assert post["state"] == "running"
    (call,) = [r for r in server.received if r.path == HOOK]
    assert call.method == "POST" and call.content_type == "application/json"
    # the configured notifier (the SMTP provider's, through an Airflow connection) mailed it
    (mail,) = deadline_stack["smtp"].wait_for(1, 30)
    assert mail.subject == f"[orders] {day} missed its deadline"
    assert json.loads(mail.text) == post

    # a manual run with the trigger form's defaults (yesterday), after B did D: skipped
    manual = stack.api.request("POST", f"/dags/{DAG_ID}/dagRuns", json={
        "logical_date": None, "conf": {}})
    assert stack.api.wait_run(DAG_ID, manual["dag_run_id"])["state"] == "success"
    # past B's deadline (and a few scheduler loops and triggerer polls): still only A's POST
    time.sleep(max(0.0, (deadline_b - datetime.now(UTC)).total_seconds()) + 15)
    assert [p["run_id"] for p in _posts(server)] == [run_a["dag_run_id"]]
    assert len(deadline_stack["smtp"].mails()) == 1  # B's first success is no recovery
    # yesterday's two runs, created by the catch-up long after their deadline, finished
    yesterday = [r for r in stack.api.dag_runs(DAG_ID, run_type="scheduled")
                 if r["partition_key"] == str(day - timedelta(days=1))]
    assert [r["state"] for r in yesterday] == ["success", "success"], yesterday
    # in Airflow's tables: only A has a deadline, missed, and its callback succeeded with the
    # message as its output; B's was pruned when B succeeded before it; yesterday's catch-up
    # runs and the manual run never had one
    deadlines = _metadata(stack, "SELECT r.run_id, d.missed, c.state, c.output FROM deadline d "
                                 "JOIN dag_run r ON r.id = d.dagrun_id "
                                 "JOIN callback c ON c.id = d.callback_id")
    assert [row[:3] for row in deadlines] == [(run_a["dag_run_id"], True, "success")], deadlines
    assert json.loads(deadlines[0][3]) == post
    # what Airflow's UI reads: A's deadline missed, none for the others
    for run in [*yesterday, run_b, manual]:
        shown = _ui_deadlines(stack, run["dag_run_id"])
        assert shown["total_entries"] == 0, (run["dag_run_id"], shown)
    shown = _ui_deadlines(stack, run_a["dag_run_id"])
    assert [(d["missed"], d["alert_name"]) for d in shown["deadlines"]] == [
        (True, f"succeeded by {deadline_stack['deadline_local']} {JKT} on the fire date")]
    triggerer = (stack.stack.log_dir / "airflow-triggerer.log").read_text(errors="replace")
    assert "Deadline missed: " in triggerer and run_a["dag_run_id"] in triggerer
    assert "Deadline passed, not alerted" not in triggerer
    stack.stack.wait_healthy(30)  # the triggerer (and every other service) is still up


def test_the_alert_is_for_scheduled_runs_created_before_their_deadline():
    """Runs Airflow also gives a deadline but the alert is not for are logged, never POSTed."""
    import asyncio

    from tokokita_airflow.notifiers import deadline_alert

    server = PingServer().start()
    try:
        deadline = {"id": "x", "deadline_time": "2026-11-03T23:00:00+00:00"}
        zone = {"tz": "Asia/Jakarta", "deadline_local_time": "06:00", "pipeline": "orders"}
        base = {"dag_id": DAG_ID, "logical_date": "2026-11-03T19:30:00Z", "state": "running",
                "partition_key": "2026-11-03", "run_type": "scheduled",
                "dag_run_id": "scheduled__2026-11-03__2026-11-03T19:30:00+00:00"}
        cases = {
            "backfill": {**base, "run_type": "backfill", "queued_at": "2026-11-20T01:00:00Z",
                         "partition_key": None},
            "manual": {**base, "run_type": "manual", "queued_at": "2026-11-03T20:00:00Z"},
            "catch-up": {**base, "queued_at": "2026-11-04T02:00:00.123456Z"},
        }
        for name, dag_run in cases.items():
            output = asyncio.run(deadline_alert(webhook_url=f"{server.url}{HOOK}", **zone,
                                                context={"dag_run": dag_run, "deadline": deadline}))
            assert json.loads(output)["not_alerted"], name
        assert server.received == []
        on_time = {**base, "queued_at": "2026-11-03T19:30:01Z"}
        output = asyncio.run(deadline_alert(webhook_url=f"{server.url}{HOOK}", **zone,
                                            context={"dag_run": on_time, "deadline": deadline}))
        assert isinstance(output, str)  # Airflow stores it as the callback's text output
        assert _posts(server) == [json.loads(output)]
        assert "not_alerted" not in json.loads(output)
        assert json.loads(output)["partition_date"] == "2026-11-03"
    finally:
        server.stop()
