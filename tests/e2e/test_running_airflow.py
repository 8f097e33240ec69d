"""End to end on a running Airflow: the compose services as local processes on PostgreSQL.

The stack (api-server, scheduler, dag-processor, triggerer, LocalExecutor) runs with the
environment docker-compose.yaml declares, on throw-away PostgreSQL databases for the
metadata and the warehouse, and is driven only through its public interfaces: the
scheduler's own catch-up, the `airflow backfill create` command, and the REST API with a
real username/password login. The watermark, the warehouse and the gold files are read to
check what happened.

Dates are relative to the real clock (the gate's lookback uses it): T is today in Jakarta.

| date | before the stack starts                   | scheduled catch-up   | backfill           |
|------|------------------------------------------|----------------------|--------------------|
| T-10 | good partition, processed (success)      | skip: lookback       | reprocessed        |
| T-9  | no partition                             | skip: sensor         | skip: missing      |
| T-8  | bad partition, 2 failed attempts         | skip: lookback       | fails: blocked at 3 |
| T-7  | good partition                           | processed (edge)     |                    |
| T-6  | good partition, processed                | skip: done           |                    |
| T-5  | good partition, 3 failed attempts        | gate fails: blocked  |                    |
| T-4  | no partition                             | skip: sensor         |                    |
| T-3  | good partition, 1 failed attempt         | processed (2nd)      |                    |
| T-2  | good partition                           | processed            |                    |
| T-1  | good partition once its run has fired    | processed            |                    |

Then through the REST API: T-7 again with `force` (identical checksums), a clear of T-8's
failed extract (runs once more and fails at once as blocked: attempts stay bounded at 3; an
unusable partition is never retried by Airflow, so the backfill's one try made the third
attempt), and T-8 with
`reset_attempts` after its partition is fixed (succeeds, reset recorded).

The module runs twice: on the default stack (LocalExecutor, data folders and state.json on
one disk) and on the scale-out profile (`config/scale-out.env`: CeleryExecutor with two
workers that share no folder, each with its own home and working copy; the watermark, claims
and manifests in the warehouse's PostgreSQL; raw, staging, gold and quarantine in an
S3-compatible object store). On the latter it also checks that the stages of a run ran on
both workers, and runs eight dates at once, in rounds, losing no update and no row.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from stack.ephemeral import (
    DAG_ID,
    PASSWORD,
    USERNAME,
    WORKERS,
    EphemeralStack,
    fire_time,
    last_fired_day,
    partition_day,
)
from tests.e2e.e2e_report import E2E_REPORT
from tokokita_etl.orders.pipeline import ORDERS

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

#: the zone of the stacks' DAG: the pipeline's default time zone (the stacks set none)
JKT = "Asia/Jakarta"
BAD_PARTITION = ("order_id,order_ts,customer_id,kota,produk,qty,harga_satuan\n"
                 "TK-1,{day} 10:00:00,C1,Bandung,Teh,1,1000\n")
STAGES = ("extract", "transform", "load", "validate", "publish_gold")
TERMINAL = ("success", "failed")


@dataclass
class Plan:
    """The e2e calendar (see the module docstring)."""

    now: datetime
    today: date
    last_day: date  # D of the latest scheduled run that has fired
    due_before: list[date] = field(default_factory=list)

    def t(self, minus: int) -> date:
        """T - minus days."""
        return self.today - timedelta(days=minus)

    @property
    def first_day(self) -> date:
        return self.t(10)

    @property
    def start_date(self) -> str:
        """TOKOKITA_START_DATE: the first fire is T-9 02:30, the run of T-10."""
        return self.t(9).isoformat()

    @property
    def end_date(self) -> str:
        """TOKOKITA_END_DATE: the latest fire that has happened."""
        return fire_time(self.last_day).isoformat()

    def catchup_days(self) -> list[date]:
        days, day = [], self.first_day
        while day <= self.last_day:
            days.append(day)
            day += timedelta(days=1)
        return days


def make_plan(now: datetime) -> Plan:
    return Plan(now=now, today=now.astimezone(ZoneInfo(JKT)).date(), last_day=last_fired_day(now))


def write_good(stack: EphemeralStack, day: date, seed: int = 7, rows: int = 60) -> None:
    from devtools.samples import generate_partition

    made = stack.root / "generated" / f"pesanan_{day.isoformat()}.csv"
    generate_partition(made, day, rows, seed=seed)
    stack.write_raw(day, made.read_bytes())


def write_bad(stack: EphemeralStack, day: date) -> None:
    stack.write_raw(day, BAD_PARTITION.format(day=day.isoformat()).encode())


def seed(stack: EphemeralStack, plan: Plan) -> None:
    """The state before the stack starts, made with the pipeline itself (as the CLI would)."""
    from tokokita_etl.runner.sequence import run_for_date

    settings = stack.settings()
    quiet = lambda line: None  # noqa: E731
    for minus in (10, 7, 6, 3, 2):
        write_good(stack, plan.t(minus))
    if plan.last_day == plan.t(1):
        write_good(stack, plan.t(1))
    for minus in (10, 6):
        assert run_for_date(ORDERS, settings, plan.t(minus), log=quiet).status == "success"
    for minus, failures in ((8, 2), (3, 1), (5, 3)):
        saved = stack.read_raw(plan.t(minus))
        write_bad(stack, plan.t(minus))
        for _ in range(failures):
            assert run_for_date(ORDERS, settings, plan.t(minus), log=quiet).status == "failed"
        if saved is not None:  # T-3 and T-5: the partition is fixed afterwards
            stack.write_raw(plan.t(minus), saved)


def wait_past_midnight(now: datetime, margin_s: float = 420) -> float:
    """Sleep past Jakarta midnight when it is less than `margin_s` away (returns the sleep).

    The gate's lookback counts from the real clock's date: a run of the test across midnight
    would expect one window and see another.
    """
    local = now.astimezone(ZoneInfo(JKT))
    midnight = datetime.combine(local.date() + timedelta(days=1), datetime.min.time(),
                                tzinfo=ZoneInfo(JKT))
    left = (midnight - local).total_seconds()
    if left < margin_s:
        time.sleep(left + 5)
        return left + 5
    return 0.0


@pytest.fixture(scope="module", params=["local", "celery"])
def e2e(tmp_path_factory, request):
    """The seeded, running stack (default or scale-out profile); stopped and its databases
    dropped afterwards."""
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.policy import due_runs
    from tokokita_etl.runner.stores import state_store

    started = time.monotonic()
    waited = wait_past_midnight(datetime.now(UTC))
    plan = make_plan(datetime.now(UTC))
    celery = request.param == "celery"
    # the warehouse and object store only as Airflow connections in the metadata database:
    # added by airflow-init on the default profile, created through the REST API on the
    # scale-out one
    stack = EphemeralStack(tmp_path_factory.mktemp(f"e2e-{request.param}"),
                           start_date=plan.start_date, end_date=plan.end_date, celery=celery,
                           connections="rest" if celery else "metadata",
                           sample_memory=True)  # the peak the e2e report records
    key = "celery_" if celery else ""
    try:
        stack.prepare()
        with stack.object_store():  # this process reads and writes the stack's bucket
            seed(stack, plan)
            settings = stack.settings()
            plan.due_before = due_runs(state_store(settings).read(), plan.now, ORDERS.raw.present(settings),
                                       settings.lookback_days, settings.max_attempts,
                                       tz=settings.timezone)
            stack.start()
            E2E_REPORT[f"{key}stack_start_to_healthy_s"] = stack.timings["healthy_s"]
            yield stack, plan
    finally:
        seen = stack.stack.processes() if stack.stack.procs else []
        peak = stack.peak_memory()
        stack.close()
        E2E_REPORT[f"{key}e2e_wall_s"] = time.monotonic() - started - waited
        if peak:
            E2E_REPORT[f"{key}stack_peak_rss_sum_bytes"] = peak["rss"]
            E2E_REPORT[f"{key}stack_peak_pss_sum_bytes"] = peak["pss"]
            E2E_REPORT[f"{key}stack_peak_processes"] = peak["processes"]
        left = [p.pid for p in seen if p.is_running() and p.status() != "zombie"]
        assert not left, f"processes left behind: {left}"


def _runs_by_day(stack: EphemeralStack, run_type: str) -> dict[date, dict]:
    runs = sorted((r for r in stack.api.dag_runs(DAG_ID) if r["run_type"] == run_type),
                  key=lambda r: r["run_after"])
    return {partition_day(r): r for r in runs}  # the newest run of each date


def _wait_runs(stack: EphemeralStack, days: list[date], run_type: str, timeout: float) -> dict:
    from stack.rest import wait_for

    def done():
        runs = _runs_by_day(stack, run_type)
        if all(d in runs and runs[d]["state"] in TERMINAL for d in days):
            return runs
        return None

    return wait_for(done, timeout, 1.0, f"{run_type} runs of {days[0]}..{days[-1]}")


def _states(stack: EphemeralStack, run: dict) -> dict[str, str]:
    return {k: ti["state"] for k, ti in stack.api.task_instances(DAG_ID, run["dag_run_id"]).items()}


# -- the tests, in order: each builds on the state the previous one left ------------------


def test_stack_is_healthy_and_login_is_real(e2e):
    stack, _ = e2e
    checks = stack.stack.healthchecks()
    assert set(checks) == {"airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                           "airflow-triggerer", *(WORKERS if stack.celery else ())}
    for name, result in checks.items():
        assert result.returncode == 0, (name, result.stdout[-500:], result.stderr[-500:],
                                        stack.stack.log_tail())

    from stack.rest import AirflowApi, ApiError

    wrong = AirflowApi(stack.target.api_url, USERNAME, PASSWORD + "-wrong")
    with pytest.raises(ApiError, match="refused: 401"):
        wrong.login()
    wrong.close()
    assert stack.api.login()
    dag = stack.api.wait_dag(DAG_ID)
    # DAGS_ARE_PAUSED_AT_CREATION is true in the compose file: the DAG itself must be active
    assert dag["is_paused"] is False


def test_the_services_get_the_warehouse_and_object_store_only_as_airflow_connections(e2e):
    stack, _ = e2e
    for name in stack.stack.names:  # the environment each service process was started with
        env = stack.stack.env(name)
        assert "TOKOKITA_WAREHOUSE_URL" not in env, name
        assert not [var for var in env if var.startswith("AWS_")], name
        # empty: Airflow reads the connection from its metadata database
        assert env.get("AIRFLOW_CONN_TOKOKITA_WAREHOUSE") == "", name
    # and as the kernel holds it, for every process of the stack whose environment is still
    # readable (Airflow's process titles overwrite some of them)
    environments = {name: env for name, env in stack.environments().items() if env}
    assert len({name.split("/")[0] for name in environments}) >= 2, environments.keys()
    for name, env in environments.items():
        assert "TOKOKITA_WAREHOUSE_URL" not in env, name
        assert not [var for var in env if var.startswith("AWS_")], name
    made = stack.api.get("/connections/tokokita_warehouse")
    assert (made["conn_type"], made["schema"]) == ("postgres", stack.warehouse_db)
    if stack.celery:
        extra = json.loads(stack.api.get("/connections/aws_default")["extra"])
        assert extra["endpoint_url"] == f"http://127.0.0.1:{stack.object_store_port}"


def test_catchup_processes_exactly_the_due_runs(e2e):
    stack, plan = e2e
    t = plan.t
    expected_due = [t(7), t(3), t(2)] + ([t(1)] if plan.last_day == t(1) else [])
    assert plan.due_before == expected_due  # the reference function, at the same clock

    started = time.monotonic()
    runs = _wait_runs(stack, plan.catchup_days(), "scheduled", timeout=240)
    key = "celery_" if stack.celery else ""
    E2E_REPORT[f"{key}catchup_runs"] = len(plan.catchup_days())
    E2E_REPORT[f"{key}catchup_wall_s"] = time.monotonic() - started + stack.timings["healthy_s"]

    assert sorted(runs) == plan.catchup_days()  # exactly one scheduled run per fire time
    processed = []
    for day, run in sorted(runs.items()):
        states = _states(stack, run)
        if states.get("publish_gold") == "success":
            processed.append(day)
        expected_state = "failed" if day == t(5) else "success"
        assert run["state"] == expected_state, (day, states)
    assert processed == plan.due_before

    # why each other date was not processed
    assert _states(stack, runs[t(10)])["check_watermark"] == "skipped"    # lookback
    assert _states(stack, runs[t(8)])["check_watermark"] == "skipped"     # lookback
    assert _states(stack, runs[t(9)])["wait_for_raw_partition"] == "skipped"
    assert _states(stack, runs[t(4)])["wait_for_raw_partition"] == "skipped"
    assert _states(stack, runs[t(6)])["check_watermark"] == "skipped"     # done
    assert _states(stack, runs[t(5)])["check_watermark"] == "failed"      # blocked

    marks = stack.watermark()
    done = {d.isoformat() for d in [*plan.due_before, t(10), t(6)]}
    assert {d for d, e in marks.items() if e["status"] == "success"} == done
    assert marks[t(3).isoformat()]["attempt"] == 2
    assert all(marks[d.isoformat()]["attempt"] == 1 for d in plan.due_before if d != t(3))
    assert (marks[t(5).isoformat()]["status"], marks[t(5).isoformat()]["attempt"]) == ("failed", 3)
    assert marks[t(8).isoformat()]["attempt"] == 2
    assert stack.warehouse_dates() == done
    assert stack.gold_dates() == done
    # nothing is left due at this clock
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.policy import due_runs
    from tokokita_etl.runner.watermark import Watermark

    settings = stack.settings()
    assert due_runs(Watermark({"runs": marks}), plan.now, ORDERS.raw.present(settings),
                    settings.lookback_days, settings.max_attempts, tz=JKT) == []


def _backfill(stack: EphemeralStack, first: date, last: date,
              *options: str) -> subprocess.CompletedProcess:
    """`airflow backfill create` for the runs of `first`..`last`, once the scheduler has
    marked every earlier backfill completed (Airflow allows one running backfill per DAG)."""
    from stack.rest import wait_for

    wait_for(lambda: all(b["completed_at"] for b in stack.api.get(
        "/backfills", dag_id=DAG_ID)["backfills"]), 60, 0.5, "earlier backfills to complete")
    command = [str(Path(stack.service_env()["PATH"].split(os.pathsep)[0]) / "airflow"),
               "backfill", "create", "--dag-id", DAG_ID,
               "--from-date", first.isoformat(), "--to-date", last.isoformat(), *options]
    return subprocess.run(command, env=stack.service_env(), capture_output=True, text=True,
                          timeout=120, check=False)


def test_backfill_reprocesses_done_skips_missing_and_blocks_the_failing_date(e2e):
    stack, plan = e2e
    t = plan.t
    days = [t(10), t(9), t(8)]
    checksums_before = stack.watermark()[t(10).isoformat()]["checksums"]
    started = time.monotonic()
    result = _backfill(stack, days[0], days[-1], "--reprocess-behavior", "completed")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    runs = _wait_runs(stack, days, "backfill", timeout=180)
    E2E_REPORT[f"{'celery_' if stack.celery else ''}backfill_wall_s"] = \
        time.monotonic() - started
    # every backfill run names the date it processed in its run record
    assert {d: runs[d]["partition_key"] for d in days} == {d: d.isoformat() for d in days}

    done, missing, failing = (runs[d] for d in days)
    # "completed": Airflow re-ran the completed run of T-10, a reprocess (as a clear is)
    assert done["state"] == "success"
    assert set(_states(stack, done).values()) == {"success"}
    assert missing["state"] == "success"
    assert _states(stack, missing)["wait_for_raw_partition"] == "skipped"
    assert failing["state"] == "failed"
    states = _states(stack, failing)
    assert states["check_watermark"] == "success" and states["extract"] == "failed"

    marks = stack.watermark()
    reprocessed = marks[t(10).isoformat()]
    assert (reprocessed["status"], reprocessed["attempt"]) == ("success", 2)
    assert reprocessed["checksums"] == checksums_before
    assert t(9).isoformat() not in marks
    entry = marks[t(8).isoformat()]
    assert (entry["status"], entry["attempt"]) == ("failed", 3)
    assert "missing required column" in entry["error"]
    # one try in this backfill (attempt 3): the partition's fault is never retried (the
    # backfill made a new run beside the scheduled run of T-8, skipped by the lookback)
    tries = stack.api.tries(DAG_ID, failing["dag_run_id"], "extract")
    assert [x["state"] for x in tries] == ["failed"]


def test_a_backfill_whose_configuration_names_one_partition_date_is_refused(e2e):
    stack, plan = e2e
    t = plan.t
    before = stack.watermark()
    result = _backfill(stack, t(12), t(11), "--dag-run-conf",
                       json.dumps({"partition_date": t(7).isoformat()}))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    runs = _wait_runs(stack, [t(12), t(11)], "backfill", timeout=120)
    for day in (t(12), t(11)):
        assert runs[day]["state"] == "failed"
        sensor = stack.api.tries(DAG_ID, runs[day]["dag_run_id"], "wait_for_raw_partition")
        assert [x["state"] for x in sensor] == ["failed"]  # no retry
        log = stack.task_log(runs[day]["dag_run_id"], "wait_for_raw_partition", 1)
        assert "a backfill processes each run's own date" in log
    assert stack.watermark() == before


def test_rest_trigger_with_force_reproduces_identical_checksums(e2e):
    stack, plan = e2e
    day = plan.t(7)
    before = stack.watermark()[day.isoformat()]
    gold_before = stack.gold(day)
    assert gold_before

    run = stack.api.trigger(DAG_ID, {"force": True}, partition_key=day.isoformat())
    assert run["logical_date"] is None and run["run_type"] == "manual"
    run = stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=120)
    assert run["state"] == "success", _states(stack, run)
    assert run["partition_key"] == day.isoformat()  # given when it was triggered
    assert _states(stack, run)["publish_gold"] == "success"

    after = stack.watermark()[day.isoformat()]
    assert after["attempt"] == before["attempt"] + 1
    assert after["checksums"] == before["checksums"]
    assert stack.gold(day) == gold_before

    # the run's summary, one JSON line in the log of the task that ended it
    tries = stack.api.tries(DAG_ID, run["dag_run_id"], "publish_gold")
    log = stack.task_log(run["dag_run_id"], "publish_gold", tries[-1]["try_number"])
    summaries = [summary for line in log.splitlines()
                 if (summary := _summary_in(line)) is not None]
    assert len(summaries) == 1, log[-2000:]
    summary = summaries[0]
    assert (summary["partition_date"], summary["status"], summary["attempt"]) == (
        day.isoformat(), "success", after["attempt"])
    assert summary["trigger"] == f"airflow:{DAG_ID}:{run['dag_run_id']}"
    assert (summary["bruto"], summary["bersih"]) == (after["bruto"], after["bersih"])


def _summary_in(line: str) -> dict | None:
    """The run summary (`"event": "tokokita_run"`) a structured task-log line carries."""
    try:
        record = json.loads(line)
        event = json.loads(record.get("event", ""))
    except (ValueError, AttributeError):
        return None
    return event if isinstance(event, dict) and event.get("event") == "tokokita_run" else None


def test_rest_clear_of_a_failed_task_runs_it_again_and_attempts_stay_bounded(e2e):
    stack, plan = e2e
    from stack.rest import wait_for

    day = plan.t(8)
    run = _runs_by_day(stack, "backfill")[day]
    tries_before = len(stack.api.tries(DAG_ID, run["dag_run_id"], "extract"))
    assert stack.watermark()[day.isoformat()]["attempt"] == 3

    stack.api.clear_task_instances(DAG_ID, run["dag_run_id"], ["extract"])

    def rerun_finished():
        tries = stack.api.tries(DAG_ID, run["dag_run_id"], "extract")
        current = stack.api.dag_run(DAG_ID, run["dag_run_id"])
        if len(tries) > tries_before and current["state"] in TERMINAL:
            return tries, current
        return None

    tries, current = wait_for(rerun_finished, 120, 1.0, "the cleared extract to run again")
    assert current["state"] == "failed"
    assert len(tries) == tries_before + 1  # ran once more, no retry
    assert tries[-1]["state"] == "failed"
    entry = stack.watermark()[day.isoformat()]
    assert (entry["status"], entry["attempt"]) == ("failed", 3)  # blocked: not a 4th attempt
    assert stack.manifests(day)[-1]["status"] == "blocked"


def test_rest_trigger_with_reset_attempts_after_fixing_the_partition_succeeds(e2e):
    stack, plan = e2e
    day = plan.t(8)
    write_good(stack, day)

    blocked = stack.api.trigger(DAG_ID, partition_key=day.isoformat())
    blocked = stack.api.wait_run(DAG_ID, blocked["dag_run_id"], timeout=120)
    assert blocked["state"] == "failed"
    assert _states(stack, blocked)["check_watermark"] == "failed"  # still blocked without reset

    run = stack.api.trigger(DAG_ID, {"reset_attempts": True}, partition_key=day.isoformat())
    run = stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=120)
    assert run["state"] == "success", _states(stack, run)

    entry = stack.watermark()[day.isoformat()]
    # the reset set the failures to 0 and kept the total (three failures, then the success)
    assert (entry["status"], entry["attempt"], entry["failures"]) == ("success", 4, 0)
    reset = entry["resets"][-1]
    assert (reset["previous_attempt"], reset["previous_failures"]) == (3, 3)
    assert reset["by"] == f"airflow:{DAG_ID}:{run['dag_run_id']}"
    assert day.isoformat() in stack.warehouse_dates()
    assert day.isoformat() in stack.gold_dates()
    assert [body["status"] for body in stack.manifests(day)][-2:] == ["blocked", "success"]


def test_the_status_page_reads_the_configured_store_and_raw_folder(e2e):
    """The status page shows the same states on files and on the scale-out profile (the
    watermark, claims and manifests in PostgreSQL, the raw partitions in object storage)."""
    import httpx

    stack, plan = e2e
    t = plan.t
    headers = {"Authorization": f"Bearer {stack.api.login()}"}
    with httpx.Client(base_url=stack.target.api_url, headers=headers, timeout=60) as client:
        answer = client.get("/tokokita/status.json")
    assert answer.status_code == 200
    rows = {row["date"]: row for row in answer.json()}
    assert rows[t(7).isoformat()]["state"] == "done"
    assert rows[t(7).isoformat()]["duration_s"] is not None  # from its last manifest
    assert rows[t(9).isoformat()]["partition"] is False  # no partition object / file
    assert rows[t(7).isoformat()]["partition"] is True
    assert (rows[t(5).isoformat()]["state"], rows[t(5).isoformat()]["label"]) == \
        ("blocked", "blocked 3/3")


# -- the scale-out profile only -----------------------------------------------------------


def _stage_hosts(stack: EphemeralStack, run: dict) -> dict[str, str]:
    """The host each stage task of `run` ran on, as its task instance records it."""
    instances = stack.api.task_instances(DAG_ID, run["dag_run_id"])
    return {task: ti.get("hostname") or "" for task, ti in instances.items() if task in STAGES
            and ti["state"] == "success"}


def test_the_stages_of_a_run_ran_on_both_workers(e2e):
    stack, _ = e2e
    if not stack.celery:
        pytest.skip("one machine: the LocalExecutor runs every task on it")
    runs = [run for run in stack.api.dag_runs(DAG_ID) if run["state"] == "success"]
    hosts_by_run = {run["dag_run_id"]: _stage_hosts(stack, run) for run in runs}
    processed = {run_id: hosts for run_id, hosts in hosts_by_run.items() if len(hosts) == 5}
    assert processed, hosts_by_run
    every_host = {host for hosts in processed.values() for host in hosts.values()}
    assert len(every_host) == 2, every_host  # both workers took stage tasks
    split = [run_id for run_id, hosts in processed.items() if len(set(hosts.values())) > 1]
    assert split, f"no run had stages on both workers: {processed}"
    E2E_REPORT["celery_runs_split_across_workers"] = f"{len(split)} of {len(processed)}"
    # the workers share no folder: the other services' data folder holds nothing of the runs
    assert [p for p in stack.data.rglob("*") if p.is_file()] == []


def test_eight_dates_at_once_on_both_workers_lose_no_update_and_no_row(e2e):
    stack, plan = e2e
    if not stack.celery:
        pytest.skip("the scale-out profile's case (the LocalExecutor's is the catch-up)")
    from tokokita_etl.warehouse.database import Warehouse

    days = [plan.t(40 + n) for n in range(8)]
    for n, day in enumerate(days):
        write_good(stack, day, seed=100 + n, rows=120)
    # the first load and a forced re-run of the eight at once (a third round, a second forced
    # re-run, checked what the first one does and took 90 s on a slow machine)
    rounds, checksums = 2, {}
    started = time.monotonic()
    for round_number in range(rounds):
        triggered = [stack.api.trigger(DAG_ID, {"force": round_number > 0},
                                       partition_key=day.isoformat()) for day in days]
        for run in triggered:
            run = stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=300)
            assert run["state"] == "success", _states(stack, run)
        marks = stack.watermark()
        for day in days:
            entry = marks[day.isoformat()]
            assert (entry["status"], entry["attempt"]) == ("success", round_number + 1)
            checksums.setdefault(day, entry["checksums"])
            assert entry["checksums"] == checksums[day]  # identical rows every round
    E2E_REPORT["celery_eight_dates_rounds"] = rounds
    E2E_REPORT["celery_eight_dates_wall_s"] = time.monotonic() - started
    settings = stack.settings()
    warehouse = Warehouse.from_settings(settings)
    from sqlalchemy import text

    with warehouse.begin() as conn:
        facts = dict(conn.execute(text(
            "SELECT order_date, count(*) FROM fact_pesanan WHERE order_date BETWEEN :a AND :b "
            "GROUP BY order_date"), {"a": days[-1], "b": days[0]}).all())
    marks = stack.watermark()
    for day in days:
        assert facts[day] == marks[day.isoformat()]["rows"]["fact"]  # no row lost or doubled
    from tokokita_etl.runner.claims import read_claim

    assert all(read_claim(settings, day) is None for day in days)  # every claim released
    for day in days:
        statuses = [body["status"] for body in stack.manifests(day)]
        assert statuses == ["success"] * rounds  # one run per trigger, none refused
