"""An Airflow connection edited on a running Airflow, through the REST API, on both executors.

The stack keeps its connections in Airflow's metadata database, as `make up` does (airflow-init
adds them; the services' `AIRFLOW_CONN_*` variables are empty: `stack.local`), and its
warehouse database lives on a PostgreSQL server that checks passwords (`password_postgres`:
the tests' own server trusts every login). The scheduled run of 2026-11-02 (the sample
partition) reaches the warehouse through the connection as airflow-init added it; then
`PATCH /api/v2/connections/tokokita_warehouse` changes its password and nothing else, as a
person editing it in Admin > Connections does, and the next run of the date fails at once (one
task, one try, one log line naming the connection, the password in no file, manifest or
answer); the password set back, the next run succeeds.

The gate (`check_watermark`) is the first task that opens the warehouse (it checks the
warehouse's identity before anything runs). The module runs twice: on the default stack
(LocalExecutor, the watermark in state.json) and on the scale-out profile
(`config/scale-out.env`: CeleryExecutor, two workers, the watermark in the warehouse's
database); `-k local` or `-k celery` selects one.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from stack.ephemeral import DAG_ID, EphemeralStack, fire_time
from stack.rest import TERMINAL, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

REPO = Path(__file__).resolve().parents[2]
DAY = date(2026, 11, 2)
CONN_ID = "tokokita_warehouse"
WRONG_PASSWORD = "wr0ng-Edit-7Kp2"
RUN_TIMEOUT_S = 240


@pytest.fixture(scope="module", params=["local", "celery"])
def edits(tmp_path_factory, request, password_postgres):
    """The running stack whose scheduled run of DAY has succeeded; stopped afterwards."""
    today = datetime.now(UTC).astimezone(ZoneInfo("Asia/Jakarta")).date()
    stack = EphemeralStack(
        tmp_path_factory.mktemp(f"connection-edits-{request.param}"),
        # one scheduled run: DAY's, older than the default lookback, which is widened
        start_date=(DAY + timedelta(days=1)).isoformat(), end_date=fire_time(DAY).isoformat(),
        tokokita_env={"TOKOKITA_LOOKBACK_DAYS": str((today - DAY).days + 7)},
        celery=request.param == "celery", warehouse_server=password_postgres.url())
    seen = []
    try:
        stack.prepare()
        with stack.object_store():
            stack.write_raw(DAY, (REPO / "data" / "raw" / f"pesanan_{DAY}.csv").read_bytes())
        stack.start()
        seen = stack.stack.processes()
        stack.api.wait_dag(DAG_ID, timeout=120)
        wait_for(lambda: [r for r in stack.api.dag_runs(DAG_ID, run_type="scheduled")
                          if r["state"] in TERMINAL], RUN_TIMEOUT_S, 1.0,
                 f"the scheduled run of {DAY}")
        yield stack
    finally:
        stack.close()
        left = [p.pid for p in seen if p.is_running() and p.status() != "zombie"]
        assert not left, f"processes left behind: {left}"


def trigger(stack: EphemeralStack) -> dict:
    """A forced run of DAY (DAY is done), to its end."""
    run = stack.api.trigger(DAG_ID, {"force": True}, partition_key=str(DAY))
    return stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=RUN_TIMEOUT_S)


def states(stack: EphemeralStack, run: dict) -> dict[str, str]:
    return {task: ti["state"]
            for task, ti in stack.api.task_instances(DAG_ID, run["dag_run_id"]).items()}


def edited(stack: EphemeralStack, **fields) -> dict:
    """The connection's body as airflow-init added it, with `fields` changed."""
    from stack.connections import rest_body

    return {**rest_body(stack.connections[CONN_ID]), **fields}


def test_the_connections_live_in_the_metadata_database_and_the_scheduled_run_used_them(edits):
    stack = edits
    for name in stack.stack.names:  # Airflow reads no connection from its environment
        env = stack.stack.env(name)
        assert {k: v for k, v in env.items() if k.startswith("AIRFLOW_CONN_")} == {
            "AIRFLOW_CONN_TOKOKITA_WAREHOUSE": "", "AIRFLOW_CONN_AWS_DEFAULT": ""}, name
        assert "TOKOKITA_WAREHOUSE_URL" not in env, name
    listed = {c["connection_id"]: c for c in stack.api.get("/connections")["connections"]}
    assert set(listed) == {CONN_ID, "aws_default"}
    warehouse = listed[CONN_ID]
    assert (warehouse["conn_type"], warehouse["port"], warehouse["schema"], warehouse["login"]) \
        == ("postgres", stack.connections[CONN_ID].port, stack.warehouse_db, "tokokita_etl")
    assert warehouse["password"] == "***"  # the API shows no password
    run = next(r for r in stack.api.dag_runs(DAG_ID) if r["run_type"] == "scheduled")
    assert run["state"] == "success", states(stack, run)
    assert stack.warehouse_dates() == {str(DAY)}


def test_a_wrong_password_fails_the_next_run_at_once_naming_the_connection_and_no_secret(edits):
    stack = edits
    stack.api.patch_connection(CONN_ID, edited(stack, password=WRONG_PASSWORD))
    assert stack.api.get(f"/connections/{CONN_ID}")["password"] == "***"
    run = trigger(stack)
    assert run["state"] == "failed"
    found = states(stack, run)
    failed = [task for task, state in found.items() if state == "failed"]
    # the first task that opens the warehouse: the gate (it checks the warehouse's identity)
    assert failed == ["check_watermark"], found
    tries = stack.api.tries(DAG_ID, run["dag_run_id"], failed[0])
    assert [t["state"] for t in tries] == ["failed"]  # no retry
    log = stack.task_log(run["dag_run_id"], failed[0], 1)
    named = [line for line in log.splitlines()
             if f"Airflow connection '{CONN_ID}'" in line
             and "password authentication failed" in line]
    assert named, log[-3000:]
    written = [path for path in stack.root.rglob("*") if path.is_file()
               and WRONG_PASSWORD.encode() in path.read_bytes()]
    assert written == []
    assert not [m for m in stack.manifests(DAY) if WRONG_PASSWORD in json.dumps(m)]


def test_setting_the_password_back_makes_the_next_run_succeed(edits):
    stack = edits
    stack.api.patch_connection(CONN_ID, edited(stack))
    run = trigger(stack)
    assert run["state"] == "success", states(stack, run)
    assert set(states(stack, run).values()) == {"success"}
    assert stack.manifests(DAY)[-1]["status"] == "success"
    assert stack.gold(DAY) is not None
