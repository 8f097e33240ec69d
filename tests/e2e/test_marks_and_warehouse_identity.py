"""A person's Mark during `load` and a warehouse that is not the watermark's, on a running
Airflow (LocalExecutor, PostgreSQL warehouse; connections in Airflow's metadata database).

- T-3: 40 rows, processed by the catch-up; a forced run of it on another, empty database is
  refused.
- T-2: 1,000,000 rows, processed by the catch-up; forced re-runs over a corrected file are
  marked success, then failed, while their `load` runs.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import psycopg
import pytest

from stack.ephemeral import DAG_ID, EphemeralStack, admin_conninfo, fire_time
from stack.rest import TERMINAL, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

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
    from tokokita_etl.checksums import fact_digest
    from tokokita_etl.warehouse import Warehouse

    warehouse = Warehouse.from_settings(stack.settings())
    with warehouse.begin(read_only=True) as conn:
        return fact_digest(warehouse, conn, day).checksum


def status_row(stack: EphemeralStack, day: date) -> dict:
    from tokokita_etl.status import status_rows

    return next(r for r in status_rows(stack.settings()) if r["date"] == str(day))


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
    run = stack.api.trigger(DAG_ID, {"force": True}, partition_key=str(big))
    run_id = run["dag_run_id"]
    wait_running(stack, run_id, "load")
    time.sleep(1.5)  # inside the load's transaction (a 1M-row load takes several seconds)
    stack.api.request("PATCH", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/load",
                      json={"new_state": mark})
    wait_for(lambda: stack.api.dag_run(DAG_ID, run_id)["state"] in TERMINAL or None, 180, 1,
             f"run {run_id} to end")

    log = stack.task_log(run_id, "load")
    assert "Airflow stops stage load while it runs" in log, log[-3000:]
    assert fact_checksum(stack, big) == recorded  # the earlier rows: nothing merged
    after = stack.watermark()[str(big)]
    assert after["failures"] == before["failures"] == 0
    assert after["attempt"] == before["attempt"]
    assert after["in_progress"]["stopped"].startswith("stage load stopped by Airflow")
    row = status_row(stack, big)
    assert (row["state"], row["label"]) == ("needs re-run", "needs re-run"), row
    assert "records no failure" in row["reason"]
    states = {t: ti["state"] for t, ti in stack.api.task_instances(DAG_ID, run_id).items()}
    if mark == "success":  # the rest of the run does not validate rows it never loaded
        assert states["validate"] == states["publish_gold"] == "skipped", states
    assert [m["status"] for m in stack.manifests(big)].count("stopped") >= 1


def test_after_the_marks_a_plain_run_reprocesses_the_date_with_no_failure_counted(marks):
    stack, _, big = marks
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

