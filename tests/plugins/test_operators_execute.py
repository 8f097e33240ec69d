"""The operators, sensor, retry policy and timetable called directly, as Airflow's own provider
tests call FileSensor.poke() or an operator's execute(): built with keyword arguments, given
a minimal context (`dag_run` and `params`), against the `project` fixture's folder."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import traceback
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
import structlog
from airflow.sdk import RetryAction
from airflow.sdk.exceptions import (
    AirflowFailException,
    AirflowRescheduleException,
    AirflowSkipException,
    TaskDeferred,
)
from structlog.testing import capture_logs

import tokokita_airflow.operators as operators_module
from tests.conftest import HEADER
from tokokita_airflow.operators import EtlStageOperator, WatermarkGateOperator
from tokokita_airflow.retry import WatermarkRetryPolicy
from tokokita_airflow.runtime import configured_settings, pipeline_settings
from tokokita_airflow.sensors import RawPartitionSensor
from tokokita_etl.errors import DataError, WarehouseError
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.claims import read_claim
from tokokita_etl.runner.stores import state_store
from tokokita_etl.runner.watermark import FAILED, SUCCESS
from tokokita_etl.warehouse.database import Warehouse

DAG_ID = "tokokita_orders_daily"
D02 = "2026-11-02"
FIRST = "manual__2026-11-30T01:00:00+00:00"
SECOND = "manual__2026-11-30T01:05:00+00:00"
STAGES = ("extract", "transform", "load", "validate", "publish_gold")
JKT = "Asia/Jakarta"


def context(key: str | None = D02, *, run_id: str = FIRST, run_type: str = "manual",
            logical_date: datetime | None = None, run_after: datetime | None = None,
            partition_key: str | None = None, clear_number: int = 0,
            conf: dict | None = None, **params: Any) -> dict[str, Any]:
    """The part of a task's context the TokoKita tasks read: a run of partition `key` (or
    `partition_key`)."""
    dag_run = SimpleNamespace(dag_id=DAG_ID, run_id=run_id, run_type=run_type,
                              logical_date=logical_date,
                              run_after=run_after or datetime.now(UTC),
                              partition_key=partition_key or key, clear_number=clear_number,
                              conf=conf or {})
    return {"dag_run": dag_run,
            "params": {"force": False, "reset_attempts": False, **params}}


def owner(run_id: str = FIRST) -> str:
    return f"airflow:{DAG_ID}:{run_id}"


def day(text: str) -> date:
    return date.fromisoformat(text)


def entry(text: str) -> dict:
    return state_store(pipeline_settings(ORDERS)).read().entry(text)


def manifests(project, text: str) -> list[dict]:
    return [json.loads(path.read_text()) for path in project.manifests(text)]


def record(text: str, status: str, times: int = 1) -> None:
    """Record outcomes of `text`; a success's rows are in the project's warehouse, which its
    first run made (an empty one: what the watermark's identity rule looks for)."""
    store = state_store(pipeline_settings(ORDERS))
    if status == SUCCESS:
        ORDERS.declare_tables()
        Warehouse.from_settings(pipeline_settings(ORDERS)).ensure_schema()
    for _ in range(times):
        payload = {"error": "missing column qty", "failed_stage": "extract"} \
            if status == FAILED else {"rows": {"fact": 8}}
        store.record(day(text), status, payload, datetime.now(UTC))


@pytest.fixture
def holders_alive(monkeypatch) -> list[str]:
    """Every Airflow claim holder reads as still running (it would otherwise ask a running
    Airflow for its run's state); returns the holders asked about."""
    asked: list[str] = []

    def alive(holder: str) -> bool:
        asked.append(holder)
        return False

    monkeypatch.setattr(operators_module, "holder_finished", alive)
    return asked


@contextlib.contextmanager
def task_log() -> Iterator[list[dict]]:
    """The entries the tasks log meanwhile, from INFO up (the level of a task's log)."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        with capture_logs() as logged:
            yield logged
    finally:
        structlog.configure(wrapper_class=wrapper)


def task_lines(logged: list[dict]) -> list[dict]:
    """The captured log entries a task writes, without Airflow's warning that `execute()` is
    called outside its task runner (what these tests do)."""
    return [entry for entry in logged if "outside of the Task Runner" not in entry["event"]]


def refusal_of(call, ctx: dict) -> tuple[str, str]:
    """What a refused task fails with (AirflowFailException: no retry; Airflow logs it as the
    log's last entry) and the detail it logged on the line before."""
    with task_log() as logged, pytest.raises(AirflowFailException) as refused:
        call(ctx)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__
    # Airflow logs the failure with its traceback: from `execute` down, nothing but it
    assert [frame.name for frame in traceback.extract_tb(refused.tb)][-2:] == [
        "wrapper", "execute"]  # (the wrapper: Airflow's, around every execute)
    last = task_lines(logged)[-1]
    assert last["log_level"] == "error" and last["event"].startswith("Refused: "), logged
    return str(refused.value), last["event"].removeprefix("Refused: ")


def gate(**kwargs) -> WatermarkGateOperator:
    return WatermarkGateOperator(task_id="check_watermark", pipeline=ORDERS, **kwargs)


def stage(name: str) -> EtlStageOperator:
    return EtlStageOperator(task_id=name, pipeline=ORDERS, stage=name)


# -- the watermark gate -------------------------------------------------------------------------

def test_the_gate_claims_a_new_date_for_its_run_and_returns_the_partition_date(project,
                                                                              holders_alive):
    assert gate().execute(context()) == {"partition_date": D02, "attempts_before": 0}
    claim = read_claim(pipeline_settings(ORDERS), day(D02))
    assert claim.owner == owner()
    assert manifests(project, D02) == []  # a run that proceeds writes its manifest at its end


def test_the_gate_skips_a_done_date_and_writes_a_skipped_manifest(project, holders_alive):
    record(D02, SUCCESS)
    with pytest.raises(AirflowSkipException, match=f"{D02} already succeeded"):
        gate().execute(context())
    [manifest] = manifests(project, D02)
    assert (manifest["status"], manifest["attempt"], manifest["exit_code"]) == ("skipped", 1, 0)
    assert manifest["trigger"] == owner()
    assert manifest["rows"] == {"fact": 8}  # the figures of the success it skipped
    assert read_claim(pipeline_settings(ORDERS), day(D02)) is None
    assert entry(D02)["attempt"] == 1


def test_the_gate_reprocesses_a_done_date_when_the_run_is_forced(project, holders_alive):
    record(D02, SUCCESS)
    assert gate().execute(context(force=True)) == {"partition_date": D02, "attempts_before": 1}
    assert read_claim(pipeline_settings(ORDERS), day(D02)).owner == owner()
    assert manifests(project, D02) == []


def test_a_forced_run_is_forced_in_the_gate_and_in_every_stage(project, holders_alive):
    """Regression: the gate took `force` from its own argument while the stages read only the
    run's param, so a gate forced that way claimed a done date and every stage skipped it."""
    record(D02, SUCCESS)
    ctx = context(force=True)
    gate().execute(ctx)
    assert stage("extract").execute(ctx)["stage"] == "extract"


def test_the_gate_fails_a_blocked_date_without_retry_and_writes_a_blocked_manifest(
        project, holders_alive):
    record(D02, FAILED, times=3)
    with pytest.raises(AirflowFailException) as refused:
        gate().execute(context())
    message = str(refused.value)
    assert f"{D02} is blocked after 3 attempts (max_attempts=3)" in message
    assert f'partition key {D02} and {{"reset_attempts": true}}' in message
    [manifest] = manifests(project, D02)
    assert (manifest["status"], manifest["attempt"], manifest["exit_code"]) == ("blocked", 3, 3)
    assert entry(D02)["attempt"] == 3  # no attempt for a refused run
    assert read_claim(pipeline_settings(ORDERS), day(D02)) is None


def test_the_gate_unblocks_a_date_with_reset_attempts_and_logs_and_records_who_reset_it(
        project, holders_alive, capsys):
    record(D02, FAILED, times=3)
    result = gate().execute(context(reset_attempts="true"))  # as a trigger form may send it
    # the failures are reset; the total of recorded outcomes (three failures) is kept
    assert result == {"partition_date": D02, "attempts_before": 3}
    log = capsys.readouterr().out
    assert f"reset_attempts: attempts of {D02} reset from 3 to 0 by {owner()}" in log
    [reset] = entry(D02)["resets"]
    assert (reset["by"], reset["previous_attempt"]) == (owner(), 3)
    assert read_claim(pipeline_settings(ORDERS), day(D02)).owner == owner()


def test_a_scheduled_gate_skips_a_date_older_than_the_lookback(project, holders_alive):
    old = (datetime.now(UTC).date() - timedelta(days=12)).isoformat()
    fire = datetime.now(UTC) - timedelta(days=11)
    with pytest.raises(AirflowSkipException, match="older than lookback_days=7"):
        gate().execute(context(None, run_type="scheduled", logical_date=fire, partition_key=old,
                               run_id=f"scheduled__{old}"))
    [manifest] = manifests(project, old)
    assert manifest["status"] == "skipped"


def test_a_second_gate_skips_while_another_run_holds_the_date_naming_the_holder(
        project, holders_alive, capsys):
    gate().execute(context(run_id=FIRST))
    with pytest.raises(AirflowSkipException) as skipped:
        gate().execute(context(run_id=SECOND))
    assert f"is being processed by {owner(FIRST)}" in str(skipped.value)
    assert holders_alive == [owner(FIRST)]
    assert read_claim(pipeline_settings(ORDERS), day(D02)).owner == owner(FIRST)
    assert f"Skipped: {D02} is being processed by {owner(FIRST)}" in capsys.readouterr().out
    [manifest] = manifests(project, D02)
    assert (manifest["status"], manifest["trigger"]) == ("skipped", owner(SECOND))
    assert owner(FIRST) in manifest["error"]


def test_a_second_gate_takes_the_date_over_once_the_holders_run_has_finished(project,
                                                                            monkeypatch):
    monkeypatch.setattr(operators_module, "holder_finished", lambda holder: holder == owner(FIRST))
    gate().execute(context(run_id=FIRST))
    assert gate().execute(context(run_id=SECOND))["partition_date"] == D02
    assert read_claim(pipeline_settings(ORDERS), day(D02)).owner == owner(SECOND)


def test_the_gate_of_the_same_run_again_keeps_its_claim(project, holders_alive):
    gate().execute(context())
    since = read_claim(pipeline_settings(ORDERS), day(D02)).since
    assert gate().execute(context())["partition_date"] == D02  # a cleared gate
    assert read_claim(pipeline_settings(ORDERS), day(D02)).since == since
    assert holders_alive == []


# -- the stage operators ------------------------------------------------------------------------

def test_all_five_stages_of_a_new_date_publish_gold_and_record_one_successful_attempt(
        project, holders_alive):
    ctx = context()
    gate().execute(ctx)
    for name in STAGES:
        meta = stage(name).execute(ctx)
        assert (meta["partition_date"], meta["stage"]) == (D02, name)
    assert meta["attempt"] == 1
    assert meta["gold"].endswith(f"summary_harian_{D02}.csv")
    assert project.gold(D02).exists()
    recorded = entry(D02)
    assert (recorded["status"], recorded["attempt"]) == ("success", 1)
    assert recorded["rows"] == {"extracted": 8, "karantina": 0, "duplikat": 0, "fact": 8,
                                "summary": 4}
    [manifest] = manifests(project, D02)
    assert (manifest["status"], manifest["trigger"]) == ("success", owner())
    assert read_claim(pipeline_settings(ORDERS), day(D02)) is None  # released after publish_gold
    assert not pipeline_settings(ORDERS).staging_path(day(D02)).exists()


def test_a_stage_of_a_done_date_in_a_run_nobody_cleared_is_skipped_and_changes_nothing(
        project, holders_alive):
    record(D02, SUCCESS)
    state_before = project.state_file.read_bytes()
    with pytest.raises(AirflowSkipException, match=f"{D02} already succeeded"):
        stage("load").execute(context())
    assert project.state_file.read_bytes() == state_before
    assert not pipeline_settings(ORDERS).staging_path(day(D02)).exists()
    assert manifests(project, D02) == []


def test_a_stage_of_a_blocked_date_fails_at_once_without_an_attempt(project, holders_alive):
    record(D02, FAILED, times=3)
    with pytest.raises(AirflowFailException, match="--reset-attempts"):
        stage("extract").execute(context())
    assert entry(D02)["attempt"] == 3
    [manifest] = manifests(project, D02)
    assert manifest["status"] == "blocked"
    assert not pipeline_settings(ORDERS).staging_path(day(D02)).exists()


def test_a_missing_partition_skips_the_stage_with_no_attempt_and_frees_the_date(project,
                                                                                holders_alive):
    missing = "2026-11-10"
    with pytest.raises(AirflowSkipException, match=re.escape(f"pesanan_{missing}.csv")):
        stage("extract").execute(context(missing))
    assert entry(missing).get("attempt", 0) == 0
    assert read_claim(pipeline_settings(ORDERS), day(missing)) is None
    [manifest] = manifests(project, missing)
    assert (manifest["status"], manifest["attempt"]) == ("missing", 0)


def test_an_unusable_partition_fails_without_retry_and_records_exactly_one_attempt(
        project, holders_alive):
    bad = "2026-11-05"
    header = HEADER.replace(",qty", "")
    (project.raw / f"pesanan_{bad}.csv").write_text(
        f"{header}\nTK-1,{bad} 08:00:00,CUST-1,Bandung,Sepatu,450000,0\n")
    with pytest.raises(AirflowFailException) as refused:
        stage("extract").execute(context(bad))
    assert "extract: " in str(refused.value)
    assert "missing required column(s) qty" in str(refused.value)
    recorded = entry(bad)
    assert (recorded["status"], recorded["attempt"], recorded["failed_stage"]) == (
        "failed", 1, "extract")
    assert read_claim(pipeline_settings(ORDERS), day(bad)) is None
    [manifest] = manifests(project, bad)
    assert (manifest["status"], manifest["attempt"]) == ("failed", 1)


def test_a_cleared_load_whose_staging_folder_is_gone_rebuilds_extract_and_transform(
        project, holders_alive):
    ctx = context()
    gate().execute(ctx)
    stage("extract").execute(ctx)
    stage("transform").execute(ctx)
    staging = pipeline_settings(ORDERS).staging_path(day(D02))
    shutil.rmtree(staging)  # removed, or written on another worker
    meta = stage("load").execute(ctx)
    assert (meta["partition_date"], meta["stage"]) == (D02, "load")
    assert sorted(p.name for p in staging.glob("*.json")) == [
        "extract.json", "load.json", "transform.json"]
    loaded = json.loads((staging / "load.json").read_text())
    assert (loaded["fact"], loaded["summary"], loaded["karantina"]) == (8, 4, 0)
    for name in ("validate", "publish_gold"):
        stage(name).execute(ctx)
    assert (entry(D02)["status"], entry(D02)["attempt"]) == ("success", 1)


def test_a_forced_rerun_of_a_cleared_load_after_success_rebuilds_and_changes_no_figure(
        project, holders_alive):
    ctx = context()
    for name in STAGES:
        stage(name).execute(ctx)
    before = entry(D02)
    forced = context(run_id=SECOND, force=True)
    stage("load").execute(forced)  # the staging folder was dropped after the success
    meta = stage("validate").execute(forced)
    assert meta["stage"] == "validate"
    validated = json.loads(
        (pipeline_settings(ORDERS).staging_path(day(D02)) / "validate.json").read_text())
    assert validated["checksums"] == before["checksums"]
    assert (validated["fact_rows"], validated["summary_rows"]) == (8, 4)


def test_a_cleared_run_of_a_done_date_reprocesses_it_in_the_gate(project, holders_alive):
    record(D02, SUCCESS)
    assert gate().execute(context(clear_number=1)) == {"partition_date": D02,
                                                       "attempts_before": 1}
    assert read_claim(pipeline_settings(ORDERS), day(D02)).owner == owner()
    assert entry(D02)["in_progress"]["run"] == owner()


def _gold_and_checksums(project) -> tuple[bytes, dict]:
    return project.gold(D02).read_bytes(), entry(D02)["checksums"]


def _done_by_a_run(project) -> tuple[bytes, dict]:
    """D02 processed by the gate and every stage of one run; its gold bytes and checksums."""
    ctx = context()
    gate().execute(ctx)
    for name in STAGES:
        stage(name).execute(ctx)
    return _gold_and_checksums(project)


def test_clearing_load_with_downstream_of_a_done_date_reprocesses_it_with_identical_results(
        project, holders_alive):
    gold_before, checksums_before = _done_by_a_run(project)
    cleared = context(clear_number=1)
    stage("load").execute(cleared)  # its staged inputs were dropped with the success
    intent = entry(D02)["in_progress"]
    assert (intent["run"], intent["stage"]) == (owner(), "load")
    stage("validate").execute(cleared)
    meta = stage("publish_gold").execute(cleared)
    assert meta["attempt"] == 2
    recorded = entry(D02)
    assert (recorded["status"], recorded["attempt"]) == ("success", 2)
    assert "in_progress" not in recorded
    assert _gold_and_checksums(project) == (gold_before, checksums_before)
    assert [m["status"] for m in manifests(project, D02)] == ["success", "success"]
    assert read_claim(pipeline_settings(ORDERS), day(D02)) is None


def test_clearing_publish_gold_alone_of_a_done_date_rebuilds_every_stage_before_it(
        project, holders_alive):
    gold_before, checksums_before = _done_by_a_run(project)
    stage("publish_gold").execute(context(clear_number=1))
    assert (entry(D02)["status"], entry(D02)["attempt"]) == ("success", 2)
    assert _gold_and_checksums(project) == (gold_before, checksums_before)


def test_clearing_a_done_date_over_a_corrected_partition_loads_and_publishes_the_new_result(
        project, holders_alive):
    gold_before, checksums_before = _done_by_a_run(project)
    raw = project.raw / f"pesanan_{D02}.csv"
    lines = raw.read_text().splitlines()
    raw.write_text("\n".join(lines[:-1]) + "\n")  # the corrected file drops one order
    cleared = context(clear_number=1)
    for name in ("load", "validate", "publish_gold"):
        stage(name).execute(cleared)
    recorded = entry(D02)
    assert (recorded["status"], recorded["rows"]["extracted"]) == ("success", 7)
    assert recorded["checksums"] != checksums_before
    assert project.gold(D02).read_bytes() != gold_before


def test_a_cleared_stage_of_a_done_date_skips_while_another_run_holds_it(project,
                                                                          holders_alive):
    record(D02, SUCCESS)
    gate().execute(context(run_id=SECOND, force=True))
    with pytest.raises(AirflowSkipException, match=re.escape(f"being processed by {owner(SECOND)}")):
        stage("load").execute(context(clear_number=1))
    assert entry(D02)["in_progress"]["run"] == owner(SECOND)


def test_a_backfill_whose_configuration_names_a_partition_date_is_refused_by_every_task(
        project, holders_alive):
    """Regression: raised inside the sensor's poke loop, the refusal became a skip
    (`soft_fail`), and the backfill's runs ended green having done nothing."""
    backfill = context(run_type="backfill", conf={"partition_date": D02},
                       run_id="backfill__2026-11-03T19:30:00+00:00")
    for call in (sensor().execute, gate().execute, stage("extract").execute):
        with pytest.raises(AirflowFailException, match="a backfill processes each run's own date"):
            call(backfill)
    assert entry(D02) == {}
    assert manifests(project, D02) == []


def test_a_run_whose_configuration_names_another_date_than_its_key_is_refused(
        project, holders_alive):
    """`partition_date` is no param: a REST trigger still sending one for another date than
    the run's key fails naming the partition key to use, instead of processing the key's
    date without a word; a run made before partitions (conf and key agree) runs."""
    stale = context("2026-11-30", conf={"partition_date": D02})
    for call in (sensor().execute, gate().execute):
        with pytest.raises(AirflowFailException, match=f"trigger the run with partition key {D02}"):
            call(stale)
    assert gate().execute(context(conf={"partition_date": D02}))["partition_date"] == D02


@pytest.mark.parametrize("key", ["20261102", "2026-W45-1"])
def test_a_partition_key_not_written_as_yyyy_mm_dd_is_refused_by_every_task_naming_its_form(
        project, holders_alive, key):
    """Bug: Python's date.fromisoformat read `20261102` and `2026-W45-1` as 2026-11-02, so the
    run processed that date while the grid's Partition Key filter never found it."""
    odd = context(partition_key=key)
    for call in (sensor().execute, gate().execute, stage("extract").execute):
        with pytest.raises(AirflowFailException) as refused:
            call(odd)
        assert str(refused.value) == (f"partition key {key!r} is not a date as YYYY-MM-DD: "
                                      "use '2026-11-02'")
    with pytest.raises(AirflowFailException, match=r"^partition key '2026-11-2x' is not a date "
                                                   r"as YYYY-MM-DD$"):
        gate().execute(context(partition_key="2026-11-2x"))
    assert entry(D02) == {}
    assert manifests(project, D02) == []


def test_a_users_failure_callbacks_run_after_the_claim_release_from_default_args_and_the_task():
    """Regression: `setdefault("on_failure_callback", ...)` dropped a team's own callback (from
    `default_args` or the task) or, the other way round, the claim release."""
    from airflow.sdk import DAG

    def team_alert(context):
        pass

    def task_alert(context):
        pass

    with DAG("callbacks", schedule=None, default_args={"on_failure_callback": team_alert}):
        from_default_args = EtlStageOperator(task_id="load", pipeline=ORDERS, stage="load")
        own = EtlStageOperator(task_id="validate", pipeline=ORDERS, stage="validate",
                               on_failure_callback=[task_alert])
    assert from_default_args.on_failure_callback == [operators_module._release_claim, team_alert]
    assert own.on_failure_callback == [operators_module._release_claim, task_alert]
    assert EtlStageOperator(task_id="x", pipeline=ORDERS, stage="extract").on_failure_callback == [
        operators_module._release_claim]


def test_a_stage_skips_while_another_run_holds_the_date(project, holders_alive):
    gate().execute(context(run_id=FIRST))
    with pytest.raises(AirflowSkipException, match=re.escape(f"being processed by {owner(FIRST)}")):
        stage("extract").execute(context(run_id=SECOND))
    assert not pipeline_settings(ORDERS).staging_path(day(D02)).exists()
    assert entry(D02).get("attempt", 0) == 0


def test_a_transient_warehouse_failure_is_one_attempt_and_is_retried_while_attempts_are_left(
        project, holders_alive, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", "postgresql://postgres@127.0.0.1:1/none")
    ctx = context()
    gate().execute(ctx)
    stage("extract").execute(ctx)
    stage("transform").execute(ctx)
    with pytest.raises(WarehouseError) as failed:
        stage("load").execute(ctx)
    assert failed.value.transient
    recorded = entry(D02)
    assert (recorded["status"], recorded["attempt"], recorded["failed_stage"]) == (
        "failed", 1, "load")
    assert read_claim(pipeline_settings(ORDERS), day(D02)).owner == owner()  # kept for the retry
    policy = WatermarkRetryPolicy(ORDERS)
    assert policy.evaluate(failed.value, 1, 3, ctx).action is RetryAction.DEFAULT
    record(D02, FAILED, times=2)
    out_of_attempts = policy.evaluate(failed.value, 3, 3, ctx)
    assert out_of_attempts.action is RetryAction.FAIL
    assert "max_attempts=3" in out_of_attempts.reason
    # failed for good: the task's failure callback frees the date for the next run
    load = stage("load")
    for callback in load.on_failure_callback:
        callback({**ctx, "task": load})
    assert read_claim(pipeline_settings(ORDERS), day(D02)) is None


def test_a_gate_that_cannot_reach_the_state_is_retried_and_any_other_gate_failure_is_not(
        project, holders_alive, monkeypatch):
    """Regression: the gate had no retries, so a state database restarted while a catch-up's
    gates ran (connection refused) failed those runs for good, every stage upstream_failed,
    and the catch-up needed a person's clear (tests/e2e/test_scale_out_faults.py)."""
    monkeypatch.setenv("TOKOKITA_STATE_URL", "warehouse")
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", "postgresql://postgres@127.0.0.1:1/none")
    ctx = context()
    with pytest.raises(WarehouseError) as unreachable:
        gate().execute(ctx)
    assert unreachable.value.transient
    policy = gate().retry_policy
    assert policy.evaluate(unreachable.value, 1, 3, ctx).action is RetryAction.DEFAULT
    refused = policy.evaluate(WarehouseError("permission denied for table x"), 1, 3, ctx)
    assert refused.action is RetryAction.FAIL
    assert policy.evaluate(DataError("bad"), 1, 3, ctx).action is RetryAction.FAIL
    assert type(policy).deserialize(policy.serialize()).evaluate(
        unreachable.value, 2, 3, ctx).action is RetryAction.DEFAULT


def test_a_refused_warehouse_login_fails_the_load_at_once_naming_the_connection_not_its_password(
        project, holders_alive, monkeypatch, password_postgres):
    """A refused login was a transient WarehouseError: retried up to max_attempts."""
    wrong = "wrong-Pw-op-3Kd"
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps({
        "conn_type": "postgres", "host": password_postgres.host, "port": password_postgres.port,
        "login": password_postgres.user, "password": wrong, "schema": "postgres"}))
    ctx = context()
    sentence = ("Airflow connection 'tokokita_warehouse': the database refused its login: "
                "correct its login or password")
    # the gate reads the warehouse first
    message, detail = refusal_of(gate().execute, ctx)
    assert message == sentence
    assert detail.startswith("Airflow connection 'tokokita_warehouse': warehouse "
                             "postgresql+psycopg://tokokita_etl:***@")
    assert wrong not in detail + message and entry(D02) == {}
    assert read_claim(configured_settings(ORDERS), day(D02)) is None
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps({
        "conn_type": "postgres", "host": password_postgres.host, "port": password_postgres.port,
        "login": password_postgres.user, "password": password_postgres.password,
        "schema": "postgres"}))
    gate().execute(ctx)
    stage("extract").execute(ctx)
    stage("transform").execute(ctx)
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps({
        "conn_type": "postgres", "host": password_postgres.host, "port": password_postgres.port,
        "login": password_postgres.user, "password": wrong, "schema": "postgres"}))
    # Airflow never retries it (an AirflowFailException)
    refused, message = refusal_of(stage("load").execute, ctx)
    assert refused == sentence
    assert message.startswith("Airflow connection 'tokokita_warehouse': warehouse "
                              "postgresql+psycopg://tokokita_etl:***@")
    assert "password authentication failed" in message and "\n" not in message
    assert entry(D02).get("attempt", 0) == 0  # a configuration error: no attempt used
    assert not [path for path in project.manifests(D02) if wrong in path.read_text()]
    load = stage("load")
    for callback in load.on_failure_callback:
        callback({**ctx, "task": load})
    assert read_claim(configured_settings(ORDERS), day(D02)) is None


# -- the raw-partition sensor -------------------------------------------------------------------

def sensor(**kwargs) -> RawPartitionSensor:
    return RawPartitionSensor(task_id="wait_for_raw_partition", pipeline=ORDERS, **kwargs)


def test_the_sensor_finds_a_present_partition(project):
    assert sensor().poke(context()) is True


def test_the_sensor_skips_a_manual_run_whose_partition_is_missing_naming_the_file(project):
    with pytest.raises(AirflowSkipException) as skipped:
        sensor().poke(context("2026-11-10"))
    message = str(skipped.value)
    assert str(project.raw / "pesanan_2026-11-10.csv") in message
    assert "manual run" in message
    assert project.manifests("2026-11-10") == []  # the pipeline never started for it


def test_an_empty_partition_file_counts_as_missing(project):
    (project.raw / "pesanan_2026-11-10.csv").write_bytes(b"")
    with pytest.raises(AirflowSkipException, match=r"pesanan_2026-11-10\.csv"):
        sensor().poke(context("2026-11-10"))


def scheduled_context(fired_ago: timedelta) -> tuple[dict, str]:
    fire = datetime.now(UTC).replace(microsecond=0) - fired_ago
    missing = (pendulum.instance(fire).in_timezone(JKT).date() - timedelta(days=1)).isoformat()
    return context(None, run_type="scheduled", logical_date=fire, run_after=fire,
                   partition_key=missing, run_id=f"scheduled__{missing}"), missing


def test_the_sensor_of_a_scheduled_run_waits_inside_its_window_and_skips_after_it(project):
    waiting, _ = scheduled_context(timedelta(minutes=5))
    assert sensor(wait_window=timedelta(hours=1)).poke(waiting) is False
    late, missing = scheduled_context(timedelta(hours=2))
    with pytest.raises(AirflowSkipException, match="wait window ended at") as skipped:
        sensor(wait_window=timedelta(hours=1)).poke(late)
    assert f"pesanan_{missing}.csv" in str(skipped.value)


def test_the_sensor_looks_in_its_raw_dir_argument_when_given(project, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    with pytest.raises(AirflowSkipException, match=re.escape(str(other / f"pesanan_{D02}.csv"))):
        sensor(raw_dir=str(other)).poke(context())
    shutil.copy(project.raw / f"pesanan_{D02}.csv", other)
    assert sensor(raw_dir=str(other)).poke(context()) is True


def test_a_deferrable_sensor_defers_to_the_trigger_until_the_end_of_the_window(project):
    waiting, missing = scheduled_context(timedelta(minutes=5))
    fire = waiting["dag_run"].logical_date
    with pytest.raises(TaskDeferred) as deferred:
        sensor(deferrable=True, wait_window=timedelta(hours=1)).execute(waiting)
    _, kwargs = deferred.value.trigger.serialize()
    assert kwargs["filepath"] == str(project.raw / f"pesanan_{missing}.csv")
    assert datetime.fromisoformat(kwargs["deadline"]) == fire + timedelta(hours=1)
    assert deferred.value.method_name == "execute_complete"
    assert sensor(deferrable=True).execute(context()) is None  # present: no deferral


def test_a_deferred_sensor_resumes_as_success_when_present_and_skips_on_timeout(project):
    sensor().execute_complete(context(), {"status": "present", "filepath": "/x.csv"})
    with pytest.raises(AirflowSkipException, match="did not arrive within the wait window"):
        sensor().execute_complete(context(), {"status": "timeout", "filepath": "/x.csv"})


def with_first_try(ctx: dict, first_try: datetime | None) -> dict:
    """`ctx` with the task instance a reschedule-mode sensor asks for its first try's start."""
    return {**ctx, "ti": SimpleNamespace(get_first_reschedule_date=lambda _context: first_try)}


def test_a_deferred_sensor_hands_airflow_the_same_deadline_as_its_trigger(project):
    """Regression: defer() got no timeout, so a deferral outlived the wait window when no
    triggerer ran; it now gets the time left until the trigger's own deadline."""
    waiting, _ = scheduled_context(timedelta(minutes=5))
    fire = waiting["dag_run"].logical_date
    before = datetime.now(UTC)
    with pytest.raises(TaskDeferred) as deferred:
        sensor(deferrable=True, wait_window=timedelta(hours=1)).execute(waiting)
    after = datetime.now(UTC)
    deadline = datetime.fromisoformat(deferred.value.trigger.serialize()[1]["deadline"])
    assert deadline == fire + timedelta(hours=1)
    assert deadline - after <= deferred.value.timeout <= deadline - before
    assert timedelta(minutes=54) < deferred.value.timeout < timedelta(minutes=56)


@pytest.mark.parametrize(("setting", "expected"), [("True", True), ("False", False)])
def test_deferrable_defaults_to_airflows_default_deferrable_setting(project, monkeypatch,
                                                                    setting, expected):
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", setting)
    assert sensor().deferrable is expected
    assert sensor(deferrable=not expected).deferrable is (not expected)  # an argument wins
    waiting, _ = scheduled_context(timedelta(minutes=5))
    waiting = with_first_try(waiting, None)
    with pytest.raises(TaskDeferred if expected else AirflowRescheduleException):
        sensor(wait_window=timedelta(hours=1)).execute(waiting)


def test_a_rescheduled_sensor_waits_until_the_end_of_the_window_counted_from_the_fire_time(
        project):
    """Regression: Airflow's sensor timeout (the wait window counted from the first poke) was
    a second clock beside the window counted from the fire time; only the latter decides."""
    waiting, _ = scheduled_context(timedelta(minutes=50))
    # a first try long before: Airflow's own timeout, were it the window, would have passed
    started_early = with_first_try(waiting, datetime.now(UTC) - timedelta(hours=2))
    with pytest.raises(AirflowRescheduleException):
        sensor(deferrable=False, wait_window=timedelta(hours=1)).execute(started_early)
    late, missing = scheduled_context(timedelta(minutes=70))
    started_late = with_first_try(late, datetime.now(UTC) - timedelta(minutes=1))
    with pytest.raises(AirflowSkipException, match="wait window ended at") as skipped:
        sensor(deferrable=False, wait_window=timedelta(hours=1)).execute(started_late)
    assert f"pesanan_{missing}.csv" in str(skipped.value)
    present = with_first_try(context(), None)
    assert sensor(deferrable=False).execute(present) is None


# -- the retry policy ---------------------------------------------------------------------------

def test_the_retry_policy_retries_a_transient_error_with_attempts_left_and_not_at_max(project):
    error = WarehouseError("warehouse: connection refused", transient=True)
    policy = WatermarkRetryPolicy(ORDERS)
    record(D02, FAILED)
    assert policy.evaluate(error, 1, 3, context()).action is RetryAction.DEFAULT
    record(D02, FAILED, times=2)
    assert policy.evaluate(error, 3, 3, context()).action is RetryAction.FAIL


def test_the_retry_policy_does_not_retry_a_partition_error(project):
    record(D02, FAILED)
    decision = WatermarkRetryPolicy(ORDERS).evaluate(DataError("missing column"), 1, 3, context())
    assert decision.action is RetryAction.FAIL
    assert "partition" in decision.reason


def test_the_retry_policy_without_a_context_leaves_it_to_airflow():
    assert WatermarkRetryPolicy(ORDERS).evaluate(RuntimeError("x"), 1, 3, None).action \
        is RetryAction.DEFAULT


def test_the_retry_policy_rebuilt_from_its_serialized_form_decides_as_the_original(project):
    """The policy carries nothing (it reads the watermark when evaluated): the serialized form
    is empty and the rebuilt policy, reading the pipeline of the task it is evaluated for,
    gives the same decisions."""
    original = WatermarkRetryPolicy(ORDERS)
    assert original.serialize() == {}
    rebuilt = WatermarkRetryPolicy.deserialize(original.serialize())
    transient = WarehouseError("warehouse: connection refused", transient=True)
    record(D02, FAILED)
    ctx = {**context(), "task": stage("load")}
    for error in (transient, DataError("missing column")):
        assert rebuilt.evaluate(error, 1, 3, ctx).action is \
            original.evaluate(error, 1, 3, context()).action
    assert rebuilt.evaluate(transient, 1, 3, ctx).action is RetryAction.DEFAULT


def test_the_sensor_and_its_trigger_check_an_object_in_object_storage(project, monkeypatch):
    """The endpoint and keys are only in the `aws_default` connection: no AWS variable."""
    import asyncio

    from devtools.object_store import s3_server
    from tokokita_airflow.triggers import RawPartitionTrigger
    from tokokita_etl.storage import filesystem

    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    with s3_server() as server:
        monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps({
            "conn_type": "aws", "login": "testing", "password": "testing",
            "extra": {"endpoint_url": server.endpoint, "region_name": "us-east-1"}}))
        server.create_bucket("raw-bucket")
        raw_url = "s3://raw-bucket/incoming"
        waiting, missing = scheduled_context(timedelta(minutes=5))
        with pytest.raises(TaskDeferred) as deferred:
            sensor(deferrable=True, raw_dir=raw_url,
                   wait_window=timedelta(hours=1)).execute(waiting)
        trigger = deferred.value.trigger
        assert trigger.filepath == f"{raw_url}/pesanan_{missing}.csv"
        assert trigger.serialize()[1]["conn_id"] == "aws_default"
        with pytest.raises(AirflowSkipException, match=f"{raw_url}/pesanan_{D02}.csv"):
            sensor(raw_dir=raw_url).poke(context())

        fs, key = filesystem(f"{raw_url}/pesanan_{D02}.csv")
        fs.pipe_file(key, (project.raw / f"pesanan_{D02}.csv").read_bytes())
        assert sensor(raw_dir=raw_url).poke(context()) is True

        async def first_event(trigger: RawPartitionTrigger):
            async for event in trigger.run():
                return event.payload

        from tokokita_etl.storage import use_options

        use_options("s3", None)  # the trigger reads the connection itself, on the triggerer
        present = RawPartitionTrigger(filepath=f"{raw_url}/pesanan_{D02}.csv",
                                      deadline=(datetime.now(UTC) + timedelta(minutes=1))
                                      .isoformat(), poll_interval=0.1, conn_id="aws_default")
        assert asyncio.run(first_event(present))["status"] == "present"
        absent = RawPartitionTrigger(**{**trigger.serialize()[1], "poll_interval": 0.2,
                                        "deadline": (datetime.now(UTC) + timedelta(seconds=1))
                                        .isoformat()})
        assert asyncio.run(first_event(absent))["status"] == "timeout"


class MarkedUpstreamInstance:
    """The part of a running task instance `EtlStageOperator._upstream_not_run` reads: its
    upstream stage is `success` without the result a stage returns (marked success while it
    ran)."""

    dag_id, run_id = DAG_ID, FIRST

    def xcom_pull(self, *, task_ids: str, key: str) -> None:
        return None

    def get_task_states(self, *, dag_id: str, task_ids: list[str],
                        run_ids: list[str]) -> dict[str, dict[str, str]]:
        return {FIRST: dict.fromkeys(task_ids, "success")}


def test_a_stage_after_one_marked_success_while_it_ran_logs_why_it_skips(project, daily_dag):
    """Bug: the stage after a marked one logged only Airflow's "Skipping task.", the reason
    a field of it; the status page's log link led to that log."""
    validate = daily_dag.get_task("validate")
    with task_log() as logged, pytest.raises(AirflowSkipException) as skipped:
        validate.execute({**context(), "ti": MarkedUpstreamInstance()})
    reason = ("load did not finish its work in this run (marked success while it ran?): "
              "2026-11-02 needs a re-run; clear the run or trigger the date to run it")
    assert str(skipped.value) == reason
    assert task_lines(logged)[-1] == {"event": f"Skipped: {reason}", "log_level": "warning"}
    assert entry(D02) == {}


def test_every_skip_of_a_stage_logs_its_reason_on_one_line(project, holders_alive):
    """A stage skipped by the watermark rules (a done date, not cleared) says why in its own
    line before Airflow's "Skipping task."."""
    first = context()
    gate().execute(first)
    for name in STAGES:
        stage(name).execute(first)
    with task_log() as logged, pytest.raises(AirflowSkipException) as skipped:
        stage("load").execute(context(run_id=SECOND))
    last = task_lines(logged)[-1]
    assert last == {"event": f"Skipped: {skipped.value}", "log_level": "info"}
    assert "\n" not in last["event"]
