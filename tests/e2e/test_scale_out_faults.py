"""Faults on the running scale-out profile: a catch-up of several dates loses a service midway
and still ends equal to `due_runs`, nothing lost, nothing twice.

The stack is the scale-out profile as local processes (`EphemeralStack(celery=True)`:
CeleryExecutor, two workers with homes of their own, redis, the S3-compatible object store;
the watermark, claims and manifests in the warehouse's PostgreSQL, `state_url: warehouse`).
The warehouse and state database live on a throw-away PostgreSQL cluster of this module
(tests/pgserver.py), which the state case stops (`pg_ctl stop -m immediate`) and starts again;
the test server itself is never restarted. The object store's case stops it (SIGTERM: it
refuses connections from then on) and starts it again 10 s later with the objects it held, as
a real store (S3, MinIO) keeps them (`devtools.object_store`: moto, which keeps them in
memory, with its objects written to a file on stop and loaded on start).

Each case makes partitions for new dates (`devtools.samples.generate_partition`), starts a
catch-up of them (`airflow backfill create` over the dates, one run each), injects its fault
at a moment it waits for (a stage running, its task process on a worker), and then checks:
the runs end in success through Airflow's own retries, or after the one action the case
documents (docs/scale-out.md, "Faults"); the dates processed are the `due_runs` of before;
each gold object is byte-equal to a clean `tokokita-etl run` of the same partition in a
temporary workspace; the watermark says success with the fact rows the warehouse holds, each
order once; no claim is left; nothing of the dates is due any more.

Quick mode (`make test`): the worker killed in `load`, the object store stopped during
`publish_gold` and the state database restarted during the gate, two dates of 20,000 rows each. Long mode
(`TOKOKITA_FAULTS=long`, as tests/faults): every case, three dates of 100,000 rows each.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from stack.ephemeral import DAG_ID, EphemeralStack, db_url, fire_time, partition_day
from stack.local import StackError
from stack.rest import ApiError, wait_for
from tests import pgserver

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

LONG = os.environ.get("TOKOKITA_FAULTS") == "long"
ROWS = 100_000 if LONG else 20_000
DATES_PER_CASE = 3 if LONG else 2
JKT = ZoneInfo("Asia/Jakarta")
TODAY = datetime.now(UTC).astimezone(JKT).date()
#: the one scheduled run of the stack: a date without a partition (its sensor skips it)
QUIET_DAY = TODAY - timedelta(days=80)
LOOKBACK_DAYS = 90
CATCHUP_TIMEOUT_S = 900 if LONG else 600
FAULT_WAIT_S = 300
#: throw-away stack only (NOT docker-compose.yaml's): how long a task instance may go without
#: a heartbeat, and stay queued, before the scheduler acts (Airflow's defaults: 300 s, 600 s);
#: docs/scale-out.md gives what a person waits with the defaults
FAULT_ENV = {"AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60",
             "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "90"}

#: throw-away stack only: a failed task is retried after 10 s, then 20 s (the DAG's: 1 and 2
#: minutes; the other test stacks': 1 and 2 s, shorter than a PostgreSQL restart)
RETRY_DELAY_S = 10

CASES = ["worker_killed_in_load", "worker_killed_in_publish_gold", "redis_restarted",
         "scheduler_restarted", "api_server_restarted", "object_store_stopped_in_publish_gold",
         "state_database_restarted_in_the_gate"]
QUICK = ["worker_killed_in_load", "object_store_stopped_in_publish_gold",
         "state_database_restarted_in_the_gate"]


def case_days(case: str) -> list[date]:
    """The case's own dates: a block of consecutive days per case, inside the lookback."""
    first = TODAY - timedelta(days=70 - 6 * CASES.index(case))
    return [first + timedelta(days=n) for n in range(DATES_PER_CASE)]


# -- the stack ------------------------------------------------------------------------------


class StateCluster:
    """The module's throw-away PostgreSQL cluster (warehouse and state): stopped hard and
    started again on the same port by the state case."""

    def __init__(self) -> None:
        self.server = pgserver.ThrowawayServer(pgserver.find_binaries(), superuser="postgres")

    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.server.port}/postgres"

    def stop_immediately(self) -> None:
        result = self.server.pg_ctl("-m", "immediate", "-w", "-t", "30", "stop")
        assert result.returncode == 0, result.stdout + result.stderr

    def start(self) -> None:
        log = str(self.server.data.parent / "server.log")
        result = self.server.pg_ctl("-l", log, "-o", f"-p {self.server.port}", "-w", "-t", "60",
                                    "start", start_new_session=True)
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def state_cluster() -> Iterator[StateCluster]:
    cluster = StateCluster()
    cluster.server.start()
    try:
        yield cluster
    finally:
        if cluster.server.postmaster_pid() is None and cluster.server.root is not None:
            cluster.start()  # stop() expects it running
        cluster.server.stop()


@pytest.fixture(scope="module")
def faults(tmp_path_factory, state_cluster) -> Iterator[EphemeralStack]:
    stack = EphemeralStack(
        tmp_path_factory.mktemp("scale-out-faults"),
        start_date=(QUIET_DAY + timedelta(days=1)).isoformat(),
        end_date=fire_time(QUIET_DAY).isoformat(),
        tokokita_env={"TOKOKITA_LOOKBACK_DAYS": str(LOOKBACK_DAYS)},
        celery=True, warehouse_server=state_cluster.url(), retry_delay_s=RETRY_DELAY_S)
    stack.target.extra_env.update(FAULT_ENV)
    seen = []
    try:
        stack.prepare()
        stack.start()
        seen = stack.stack.processes()
        stack.api.wait_dag(DAG_ID, timeout=120)
        yield stack
    finally:
        seen += stack.stack.processes() if stack.stack.procs else []
        stack.close()
        left = [p.pid for p in seen if p.is_running() and p.status() != "zombie"]
        assert not left, f"processes left behind: {left}"


# -- helpers --------------------------------------------------------------------------------


def write_partitions(stack: EphemeralStack, days: list[date]) -> dict[date, bytes]:
    from devtools.samples import generate_partition

    written = {}
    for day in days:
        made = stack.root / "generated" / f"pesanan_{day.isoformat()}.csv"
        made.parent.mkdir(parents=True, exist_ok=True)
        generate_partition(made, day, ROWS, seed=day.toordinal())
        written[day] = made.read_bytes()
        stack.write_raw(day, written[day])
    return written


def reference_gold(root: Path, partitions: dict[date, bytes]) -> dict[date, bytes]:
    """The gold files of a clean command-line run of the same partitions (local folders, a
    SQLite warehouse) in a temporary workspace."""
    from tests.conftest import run_cli

    raw = root / "data" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    gold = {}
    for day, data in partitions.items():
        (raw / f"pesanan_{day.isoformat()}.csv").write_bytes(data)
        result = run_cli(["run", "--date", day.isoformat()], cwd=root, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        gold[day] = (root / "data" / "gold" / f"summary_harian_{day.isoformat()}.csv").read_bytes()
    return gold


def due_now(stack: EphemeralStack) -> list[date]:
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.policy import due_runs
    from tokokita_etl.runner.stores import state_store

    settings = stack.settings()
    with stack.object_store():
        return due_runs(state_store(settings).read(), datetime.now(UTC), ORDERS.raw.present(settings),
                        settings.lookback_days, settings.max_attempts, tz=settings.timezone)


def backfill(stack: EphemeralStack, days: list[date]) -> None:
    """`airflow backfill create` over the dates (one run each), once earlier ones completed."""
    wait_for(lambda: all(b["completed_at"] for b in stack.api.get(
        "/backfills", dag_id=DAG_ID)["backfills"]), 120, 0.5, "earlier backfills to complete")
    airflow = Path(stack.service_env()["PATH"].split(os.pathsep)[0]) / "airflow"
    result = subprocess.run(
        [str(airflow), "backfill", "create", "--dag-id", DAG_ID, "--from-date",
         days[0].isoformat(), "--to-date", days[-1].isoformat()],
        env=stack.service_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def answering(probe: Callable[[], object]) -> object:
    """`probe()`, or None while the api-server does not answer (it may be the fault)."""
    try:
        return probe()
    except (ApiError, httpx.HTTPError, OSError):
        return None


def runs_of(stack: EphemeralStack, days: list[date]) -> dict[date, dict]:
    runs = sorted((r for r in stack.api.dag_runs(DAG_ID) if r["run_type"] == "backfill"),
                  key=lambda r: r["run_after"])
    by_day = {partition_day(r): r for r in runs}
    return {day: by_day[day] for day in days if day in by_day}


def running_task(stack: EphemeralStack, days: list[date], task_id: str,
                 with_process: bool = True) -> tuple[date, dict, object] | None:
    """The first run of `days` whose `task_id` is running (and whose task process a worker
    already runs): (date, run, psutil process or None)."""
    for day, run in runs_of(stack, days).items():
        ti = stack.api.task_instances(DAG_ID, run["dag_run_id"]).get(task_id)
        if ti and ti["state"] == "running":
            process = stack.task_process(run["dag_run_id"], task_id) if with_process else None
            if process is not None or not with_process:
                return day, run, process
    return None


def wait_until_running(stack: EphemeralStack, days: list[date], task_id: str,
                       with_process: bool = True, poll: float = 0.3):
    return wait_for(lambda: answering(lambda: running_task(stack, days, task_id, with_process)),
                    FAULT_WAIT_S, poll, f"{task_id} of {days[0]}..{days[-1]} to run")


def wait_finished(stack: EphemeralStack, days: list[date]) -> dict[date, dict]:
    def done():
        runs = answering(lambda: runs_of(stack, days))
        if runs and len(runs) == len(days) and all(
                r["state"] in ("success", "failed") for r in runs.values()):
            return runs
        return None

    return wait_for(done, CATCHUP_TIMEOUT_S, 2.0, f"the catch-up of {days[0]}..{days[-1]}")


def states(stack: EphemeralStack, run: dict) -> dict[str, str]:
    return {task: ti["state"]
            for task, ti in stack.api.task_instances(DAG_ID, run["dag_run_id"]).items()}


# -- the faults -----------------------------------------------------------------------------


def kill_worker_running(stack: EphemeralStack, days: list[date], task_id: str) -> str:
    """SIGKILL the worker's child that runs `task_id` of one of the runs, once the stage is at
    work (its log says so): the Celery pool process that supervises the task process (which
    it forked, and which is left without its supervisor)."""
    day, run, task = wait_until_running(stack, days, task_id)
    try_number = stack.api.task_instances(DAG_ID, run["dag_run_id"])[task_id]["try_number"]

    def at_work() -> bool:
        try:
            return "Running: " in stack.task_log(run["dag_run_id"], task_id, try_number)
        except FileNotFoundError:
            return False

    wait_for(at_work, 120, 0.05, f"{task_id} of {day} to start its work")
    supervisor = task.parent()
    worker = stack.worker_of(task)
    supervisor.send_signal(signal.SIGKILL)
    return (f"SIGKILL of {worker}'s pool process {supervisor.pid} supervising {task_id} of "
            f"{day} at work (task process {task.pid})")


def restart_redis(stack: EphemeralStack, days: list[date]) -> str:
    day, _, _ = wait_until_running(stack, days, "transform", with_process=False)
    stack.stop_helper("redis", kill=True)
    time.sleep(5)
    stack.start_helper("redis")
    return f"redis killed and started again (empty) while transform of {day} ran"


def restart_service(stack: EphemeralStack, days: list[date], name: str, task_id: str) -> str:
    day, _, _ = wait_until_running(stack, days, task_id, with_process=False)
    stack.stack.restart_service(name)
    stack.stack.wait_healthy(180)
    return f"{name} restarted while {task_id} of {day} ran"


def stop_object_store(stack: EphemeralStack, days: list[date]) -> str:
    day, _, _ = wait_until_running(stack, days, "publish_gold", with_process=False, poll=0.1)
    stack.stop_helper("object-store")
    time.sleep(10)
    stack.start_helper("object-store")
    return (f"object store stopped (connections refused) for 10 s while publish_gold of {day} "
            "ran, then started again with its objects")


def restart_state_database(stack: EphemeralStack, days: list[date],
                           cluster: StateCluster) -> str:
    """Stop the state cluster hard as soon as a gate is queued or running, start it 2 s later
    (with its crash recovery, about 8 s without a state database)."""
    import psycopg

    # the scheduler's own table, read at 20 looks a second on one connection, from before
    # the backfill is created (`_arm`): a gate is queued and running for a second or two
    conninfo = db_url(stack.metadata_db).replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        def gate_due():
            return conn.execute(
                "SELECT run_id, state FROM task_instance WHERE dag_id = %s AND "
                "task_id = 'check_watermark' AND state IN ('queued', 'running') LIMIT 1",
                (DAG_ID,)).fetchone()

        run_id, state = wait_for(gate_due, FAULT_WAIT_S, 0.05, "a gate to start")
    cluster.stop_immediately()
    time.sleep(2)
    cluster.start()
    day = next(day for day, run in runs_of(stack, days).items() if run["dag_run_id"] == run_id)
    return f"state PostgreSQL stopped (immediate) for 2 s when the gate of {day} was {state}"


# -- the cases ------------------------------------------------------------------------------


def _arm(case: str, stack: EphemeralStack, days: list[date],
         cluster: StateCluster) -> Future[str] | None:
    """A fault that must be watching before the backfill's runs exist: the state database's,
    in a gate (on a loaded machine every gate of the backfill was over before `airflow
    backfill create` had exited)."""
    if case != "state_database_restarted_in_the_gate":
        return None
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(restart_state_database, stack, days, cluster)
    finally:
        pool.shutdown(wait=False)


def _inject(case: str, stack: EphemeralStack, days: list[date], cluster: StateCluster) -> str:
    if case == "worker_killed_in_load":
        return kill_worker_running(stack, days, "load")
    if case == "worker_killed_in_publish_gold":
        return kill_worker_running(stack, days, "publish_gold")
    if case == "redis_restarted":
        return restart_redis(stack, days)
    if case == "scheduler_restarted":
        return restart_service(stack, days, "airflow-scheduler", "transform")
    if case == "api_server_restarted":
        return restart_service(stack, days, "airflow-apiserver", "load")
    if case == "object_store_stopped_in_publish_gold":
        return stop_object_store(stack, days)
    raise KeyError(case)


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c in QUICK or LONG else
                                               pytest.mark.skip(reason="long mode only "
                                                                "(TOKOKITA_FAULTS=long)"))
                                  for c in CASES])
@pytest.mark.timeout(CATCHUP_TIMEOUT_S + FAULT_WAIT_S + 600)
def test_the_catch_up_survives_the_fault_equal_to_due_runs_nothing_lost_nothing_twice(
        faults, state_cluster, tmp_path, case):
    stack, days = faults, case_days(case)
    partitions = write_partitions(stack, days)
    due_before = [day for day in due_now(stack) if day in days]
    assert due_before == days  # new partitions, no watermark entry: every one is due
    reference = reference_gold(tmp_path / "reference", partitions)

    started = time.monotonic()
    armed = _arm(case, stack, days, state_cluster)
    backfill(stack, days)
    fault = armed.result() if armed else _inject(case, stack, days, state_cluster)
    runs = wait_finished(stack, days)
    failed = {day: states(stack, run) for day, run in runs.items() if run["state"] != "success"}
    assert not failed, f"{fault}; runs not recovered by Airflow's retries: {failed}\n" + \
        _logs(stack)
    retried = {f"{day} {task}": [t["state"] for t in stack.api.tries(
                   DAG_ID, run["dag_run_id"], task)]
               for day, run in runs.items() for task, ti in stack.api.task_instances(
                   DAG_ID, run["dag_run_id"]).items() if (ti.get("try_number") or 0) > 1}
    print(f"{case}: {fault}; catch-up of {len(days)} dates done "
          f"{time.monotonic() - started:.0f} s after it started; tries: {retried}")

    _assert_nothing_lost_nothing_twice(stack, days, due_before, reference)


def _logs(stack: EphemeralStack) -> str:
    try:
        return stack.stack.log_tail(1500)
    except (OSError, StackError):
        return ""


def _assert_nothing_lost_nothing_twice(stack: EphemeralStack, days: list[date],
                                       due_before: list[date],
                                       reference: dict[date, bytes]) -> None:
    from sqlalchemy import text

    from tokokita_etl.runner.claims import read_claim
    from tokokita_etl.warehouse.database import Warehouse

    runs = runs_of(stack, days)
    processed = sorted(day for day, run in runs.items()
                       if states(stack, run).get("publish_gold") == "success")
    assert processed == due_before
    with stack.object_store():
        for day in days:
            assert stack.gold(day) == reference[day], day
    marks = stack.watermark()
    settings = stack.settings()
    warehouse = Warehouse.from_settings(settings)
    with warehouse.begin() as conn:
        counts = {row[0]: (row[1], row[2]) for row in conn.execute(text(
            "SELECT order_date, count(*), count(DISTINCT order_id) FROM fact_pesanan "
            "WHERE order_date BETWEEN :a AND :b GROUP BY order_date"),
            {"a": days[0], "b": days[-1]})}
    for day in days:
        entry = marks[day.isoformat()]
        assert entry["status"] == "success", (day, entry)
        rows, distinct = counts[day]
        assert rows == distinct == entry["rows"]["fact"], (day, counts[day], entry["rows"])
        assert read_claim(settings, day) is None, day
    assert not [day for day in due_now(stack) if day in days]
