"""The DAG through real Airflow task execution (`dag.test()`) against a real SQLite warehouse."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pendulum
import pytest

from tests.airflow_support import fire_time

pytestmark = pytest.mark.airflow

JKT = "Asia/Jakarta"
STAGES = ("extract", "transform", "load", "validate", "publish_gold")



def state_of(project, day: str) -> dict:
    return json.loads(project.state_file.read_text())["runs"][day]


def sensor_rescheduled() -> bool:
    """Whether a sensor try has given its slot back (state up_for_reschedule)."""
    from airflow.models import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(TaskInstance).filter(
            TaskInstance.task_id == "wait_for_raw_partition",
            TaskInstance.state == "up_for_reschedule").count() > 0


def run_current_scheduled_run_while_the_file_lands(project, run_dag, after_s: float,
                                                   when=lambda: True):
    """Run today's scheduled run (fired a minute ago); its partition lands once `when()` holds
    and at least `after_s` seconds have passed."""
    import threading
    import time

    logical = pendulum.instance(datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1))
    day = (logical.in_timezone(JKT).date() - timedelta(days=1)).isoformat()
    target = project.raw / f"pesanan_{day}.csv"
    text = (project.raw / "pesanan_2026-11-02.csv").read_text().replace("2026-11-02", day)

    def drop_file():  # the way writers publish: a .part file renamed into place
        deadline = time.monotonic() + 60
        while not when() and time.monotonic() < deadline:
            time.sleep(0.2)
        tmp = target.with_suffix(".part")
        tmp.write_text(text)
        tmp.rename(target)

    timer = threading.Timer(after_s, drop_file)
    timer.start()
    try:
        dr, states = run_dag(logical, run_type="scheduled")
    finally:
        timer.cancel()
    assert states["wait_for_raw_partition"][0] == "success"
    assert dr.state == "success", states
    return dr


def test_sample_dates_succeed_and_publish_gold(project, run_dag):
    for day in ("2026-11-02", "2026-11-03", "2026-11-04"):
        dr, states = run_dag(fire_time(day))
        assert dr.state == "success", states
        assert all(states[t][0] == "success" for t in STAGES), states
        entry = state_of(project, day)
        assert (entry["status"], entry["attempt"]) == ("success", 1)
        assert project.gold(day).exists()
    assert state_of(project, "2026-11-02")["rows"] == {
        "extracted": 8, "karantina": 0, "duplikat": 0, "fact": 8, "summary": 4}
    assert state_of(project, "2026-11-02")["bruto"] == "3542000.00"


def test_rerun_is_skipped_by_the_gate_and_force_reproduces_checksums(project, run_dag):
    day = "2026-11-02"
    run_dag(fire_time(day))
    first = state_of(project, day)

    dr, states = run_dag(fire_time(day))
    assert dr.state == "success"
    assert states["check_watermark"][0] == "skipped"
    assert all(states[t][0] == "skipped" for t in STAGES)
    assert state_of(project, day)["attempt"] == 1
    manifests = [json.loads(p.read_text()) for p in project.manifests(day)]
    assert [m["status"] for m in manifests] == ["success", "skipped"]

    dr, states = run_dag(fire_time(day), conf={"force": True})
    assert dr.state == "success" and states["publish_gold"][0] == "success"
    forced = state_of(project, day)
    assert forced["attempt"] == 2
    assert forced["checksums"] == first["checksums"]


def test_unusable_partition_fails_at_once_one_attempt_per_run_then_blocks(
        project, run_dag, daily_dag, monkeypatch):
    day = "2026-11-05"
    (project.raw / f"pesanan_{day}.csv").write_text(
        "order_id,order_ts,customer_id,kota,produk,qty,harga_satuan\n"
        "TK-1,2026-11-05 10:00:00,C1,Bandung,Teh,1,1000\n")
    assert daily_dag.get_task("extract").retries == 2  # for transient errors only
    monkeypatch.setenv("TOKOKITA_MAX_ATTEMPTS", "2")  # two runs show one attempt per run

    # each run: extract fails once (the partition itself is at fault: no Airflow retry)
    for attempt in (1, 2):
        dr, states = run_dag(fire_time(day))
        assert dr.state == "failed"
        assert states["extract"] == ("failed", 1)
        entry = state_of(project, day)
        assert (entry["status"], entry["attempt"]) == ("failed", attempt)
        assert "missing required column(s) diskon" in entry["error"]
        assert entry["failed_stage"] == "extract"

    # the next run: the gate fails at once, without retry, saying how to unblock
    dr, states = run_dag(fire_time(day))
    assert dr.state == "failed"
    assert states["check_watermark"] == ("failed", 1)
    assert all(states[t][0] == "upstream_failed" for t in STAGES)
    assert state_of(project, day)["attempt"] == 2
    blocked = json.loads(project.manifests(day)[-1].read_text())
    assert blocked["status"] == "blocked"
    assert f'partition key {day} and {{"reset_attempts": true}}' in blocked["error"]

    # fix the partition, trigger with reset_attempts: it succeeds; stale error fields go
    (project.raw / f"pesanan_{day}.csv").write_text(
        "order_id,order_ts,customer_id,kota,produk,qty,harga_satuan,diskon\n"
        "TK-1,2026-11-05 10:00:00,C1,Bandung,Teh,1,1000,0\n")
    dr, states = run_dag(fire_time(day), conf={"reset_attempts": True})
    assert dr.state == "success", states
    entry = state_of(project, day)
    # the reset set the failures to 0 and kept the total (two failures, then the success)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("success", 3, 0)
    assert "error" not in entry and "failed_stage" not in entry
    assert entry["resets"][0]["previous_attempt"] == 2
    assert entry["resets"][0]["previous_failures"] == 2
    assert entry["resets"][0]["by"].startswith("airflow:tokokita_orders_daily:")


def test_more_retries_do_not_unblock_a_date_at_max_attempts(project, run_dag, daily_dag,
                                                             monkeypatch):
    """Regression: a rendered `reset_attempts` template stuck on the gate and unblocked dates."""
    day = "2026-11-06"
    (project.raw / f"pesanan_{day}.csv").write_bytes(b"order_id,order_ts\n\xff\xfe broken\n")
    project.fail_from_the_command_line(day, 3)  # blocked at max_attempts 3
    assert state_of(project, day)["attempt"] == 3
    monkeypatch.setattr(daily_dag.get_task("extract"), "retries", 5)
    _, states = run_dag(fire_time(day))
    assert states["check_watermark"] == ("failed", 1)
    assert state_of(project, day)["attempt"] == 3


def test_missing_partition_of_a_past_date_skips_at_once_without_an_attempt(project, run_dag):
    dr, states = run_dag(fire_time("2026-11-10"))
    assert dr.state == "success"
    assert states["wait_for_raw_partition"] == ("skipped", 1)
    assert all(states[t][0] == "skipped" for t in ("check_watermark", *STAGES))
    assert not project.state_file.exists() or "2026-11-10" not in project.state_file.read_text()


def test_backfill_run_of_a_missing_date_is_skipped_not_failed(project, run_dag):
    dr, states = run_dag(fire_time("2026-11-11"), run_type="backfill")
    assert dr.state == "success"
    assert states["wait_for_raw_partition"][0] == "skipped"


def test_a_backfill_run_of_a_done_date_reprocesses_it_as_clear_does_with_identical_results(
        project, run_dag):
    """Airflow's backfill of a partitioned DAG creates a new run beside a done date's run (All
    Runs) instead of clearing it: that run re-runs the date, as Clear does, and reproduces its
    checksums and gold bytes."""
    day = "2026-11-02"
    run_dag(None, partition_key=day)
    first, gold = state_of(project, day), project.gold(day).read_bytes()
    dr, states = run_dag(fire_time(day), run_type="backfill")
    assert (dr.partition_key, dr.logical_date) == (day, None)
    assert dr.state == "success" and states["publish_gold"][0] == "success", states
    again = state_of(project, day)
    assert again["attempt"] == first["attempt"] + 1
    assert again["checksums"] == first["checksums"]
    assert project.gold(day).read_bytes() == gold


def test_scheduled_catchup_older_than_lookback_is_skipped_by_the_gate(project, run_dag):
    _, states = run_dag(fire_time("2026-11-02"), run_type="scheduled")
    assert states["wait_for_raw_partition"][0] == "success"
    assert states["check_watermark"][0] == "skipped"
    assert not project.gold("2026-11-02").exists()


def test_manual_trigger_with_a_partition_key_processes_that_date(project, run_dag):
    dr, states = run_dag(None, partition_key="2026-11-03")
    assert dr.state == "success", states
    assert dr.partition_key == "2026-11-03"
    assert project.gold("2026-11-03").exists()
    assert state_of(project, "2026-11-03")["status"] == "success"


def test_current_scheduled_run_waits_in_reschedule_mode_until_the_file_lands(
        project, run_dag, daily_dag, monkeypatch):
    """The sensor of today's scheduled run gives its slot back while waiting (reschedule)."""
    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session

    sensor = daily_dag.get_task("wait_for_raw_partition")
    monkeypatch.setattr(sensor, "poke_interval", 1)
    dr = run_current_scheduled_run_while_the_file_lands(project, run_dag, after_s=0.5,
                                                        when=sensor_rescheduled)
    with create_session() as session:
        reschedules = session.query(TaskReschedule).filter(
            TaskReschedule.ti_id.in_(
                [ti.id for ti in dr.get_task_instances() if ti.task_id == sensor.task_id])
        ).count()
    assert reschedules >= 1


def test_gold_asset_event_carries_the_partition_date(project, run_dag):
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    dr, _ = run_dag(fire_time("2026-11-02"))
    with create_session() as session:
        events = [e for e in session.query(AssetEvent).all()
                  if e.source_run_id == dr.run_id]
    assert len(events) == 1
    assert events[0].extra["partition_date"] == "2026-11-02"
    assert events[0].extra["gold"].endswith("summary_harian_2026-11-02.csv")


def test_raw_partition_trigger_round_trips_serialize_and_fires(tmp_path):
    import asyncio

    from tokokita_airflow.triggers import RawPartitionTrigger

    path = tmp_path / "pesanan_2026-11-02.csv"
    deadline = (datetime.now(UTC) + timedelta(seconds=30)).isoformat()
    trigger = RawPartitionTrigger(str(path), deadline, poll_interval=0.05)
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)

    async def first_event(t):
        async for event in t.run():
            return event.payload

    async def drop_then_wait():
        waiter = asyncio.ensure_future(first_event(rebuilt))
        await asyncio.sleep(0.2)
        assert not waiter.done()  # still polling while the file is absent
        path.write_text("order_id\n1\n")
        return await asyncio.wait_for(waiter, 5)

    assert asyncio.run(drop_then_wait())["status"] == "present"
    late = RawPartitionTrigger(str(tmp_path / "never.csv"),
                               (datetime.now(UTC) - timedelta(seconds=1)).isoformat())
    assert asyncio.run(first_event(late))["status"] == "timeout"


def test_deferrable_sensor_waits_on_the_trigger_and_succeeds_when_the_file_lands(
        project, run_dag, daily_dag, monkeypatch):
    sensor = daily_dag.get_task("wait_for_raw_partition")
    monkeypatch.setattr(sensor, "deferrable", True)
    monkeypatch.setattr(sensor, "poke_interval", 0.5)
    run_current_scheduled_run_while_the_file_lands(project, run_dag, after_s=2.0)


def test_status_page_refuses_requests_without_a_login_and_exposes_no_docs(project, run_dag):
    """The page, its JSON and its actions need Airflow's login (the content is checked on a
    running Airflow in tests/e2e/test_status_page.py); FastAPI's docs and schema are off."""
    from airflow.api_fastapi.app import init_auth_manager
    from fastapi.testclient import TestClient
    from tokokita_plugin import TokokitaPlugin

    run_dag(fire_time("2026-11-02"))
    init_auth_manager()  # the configured auth manager, as the api-server starts it
    app = TokokitaPlugin.fastapi_apps[0]["app"]
    client = TestClient(app, follow_redirects=False)
    assert client.get("/status.json").status_code == 401
    page = client.get("/")
    assert page.status_code == 303 and "login" in page.headers["location"]
    assert "next=" in page.headers["location"]
    assert client.get("/confirm", params={"action": "unblock", "date": "2026-11-02"}
                      ).status_code == 303
    assert client.post("/actions", data={"action": "unblock", "date": "2026-11-02"}
                       ).status_code == 401
    assert client.get("/status.json", headers={"Authorization": "Bearer not-a-jwt"}
                      ).status_code in (401, 403)
    for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):
        assert client.get(path).status_code == 404, path
    assert TokokitaPlugin.external_views[0]["href"] == "/tokokita/"


def test_clearing_a_stage_of_a_blocked_date_fails_at_once_without_an_attempt(project, run_dag,
                                                                               daily_dag):
    """Regression: a cleared stage skipped the gate and recorded attempt 4 of max 3."""
    day = "2026-11-07"
    (project.raw / f"pesanan_{day}.csv").write_text("order_id,order_ts\nTK-1,x\n")
    project.fail_from_the_command_line(day, 3)  # blocked at max_attempts 3
    assert state_of(project, day)["attempt"] == 3
    # re-run the stages only, as a clear of `extract` does: sensor and gate are not re-run
    dr = daily_dag.test(logical_date=fire_time(day),
                        mark_success_pattern="wait_for_raw_partition|check_watermark")
    states = {ti.task_id: (ti.state, ti.try_number) for ti in dr.get_task_instances()}
    assert states["extract"] == ("failed", 1)
    assert state_of(project, day)["attempt"] == 3
    assert json.loads(project.manifests(day)[-1].read_text())["status"] == "blocked"
