"""End to end on a running Airflow, on both executors (LocalExecutor, and CeleryExecutor with
two workers): backfill, clear and trigger by partition date, in Airflow 3.3's own terms (the
DAG's `DailyPartitionTimetable`, a `CronPartitionTimetable`).

Three ranges of three dates, each holding a missing date (a good partition, no run), a done
date (a good partition processed by a manual run triggered with its partition key) and a
failed date (a manual run of a bad partition that failed once; the partition is fixed
afterwards). Each range is backfilled over its partition dates, D1..D2 as a person types them,
with one reprocess behaviour; the dates each must process:

| range | backfill                                     | missing M | done S      | failed F  |
|-------|----------------------------------------------|-----------|-------------|-----------|
| R1    | Missing Runs (`airflow backfill create`)     | processed | no run      | no run    |
| R2    | Missing and Errored (REST `POST /backfills`) | processed | no run      | processed |
| R3    | All Runs (`airflow backfill create`)         | processed | reprocessed | processed |

A reprocessed date keeps its checksums and gold bytes (Clear semantics).

Then a clear by partition key (REST `clearDagRuns`) and by partition date window
(`airflow dags clear`) re-run exactly those dates, and the runs list's Partition Key filter
finds every run of a date. Last, the upgrade in place: the runs put back as the previous
release left them (no partition date), airflow-init again and the services restarted.
Dates are relative to the real clock: T is today in Jakarta.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from stack.ephemeral import DAG_ID, EphemeralStack, fire_time, last_fired_day
from tests.e2e.e2e_report import E2E_REPORT

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

JKT = "Asia/Jakarta"
BAD_PARTITION = ("order_id,order_ts,customer_id,kota,produk,qty,harga_satuan\n"
                 "TK-1,{day} 10:00:00,C1,Bandung,Teh,1,1000\n")
TERMINAL = ("success", "failed")
#: the first date of each range, days before today
RANGES = {"none": 20, "failed": 16, "completed": 12}


def today() -> date:
    return datetime.now(UTC).astimezone(ZoneInfo(JKT)).date()


def dates(behaviour: str) -> tuple[date, date, date]:
    """The missing, done and failed date of a range."""
    first = today() - timedelta(days=RANGES[behaviour])
    return first, first + timedelta(days=1), first + timedelta(days=2)


def write_good(stack: EphemeralStack, day: date) -> None:
    from devtools.samples import generate_partition

    made = stack.root / "generated" / f"pesanan_{day.isoformat()}.csv"
    generate_partition(made, day, 40, seed=day.toordinal())
    stack.write_raw(day, made.read_bytes())


def runs_of(stack: EphemeralStack, day: date, run_type: str | None = None) -> list[dict]:
    """The runs of partition `day` (the runs list's Partition Key filter)."""
    runs = stack.api.get(f"/dags/{DAG_ID}/dagRuns", partition_key_pattern=day.isoformat(),
                         limit=100)["dag_runs"]
    return [r for r in runs if r["partition_key"] == day.isoformat()
            and (run_type is None or r["run_type"] == run_type)]


def task_states(stack: EphemeralStack, run: dict) -> dict[str, str]:
    return {k: ti["state"] for k, ti in
            stack.api.task_instances(DAG_ID, run["dag_run_id"]).items()}


def airflow(stack: EphemeralStack, *args: str) -> subprocess.CompletedProcess:
    """The `airflow` command of the stack, with the scheduler's environment."""
    binary = Path(stack.service_env()["PATH"].split(os.pathsep)[0]) / "airflow"
    return subprocess.run([str(binary), *args], env=stack.service_env(), capture_output=True,
                          text=True, timeout=180, check=False)


def wait_backfill_done(stack: EphemeralStack, days: list[date], timeout: float = 300) -> None:
    """Every backfill completed and every run of `days` finished."""
    from stack.rest import wait_for

    def done():
        backfills = stack.api.get("/backfills", dag_id=DAG_ID)["backfills"]
        runs = [r for d in days for r in runs_of(stack, d)]
        return all(b["completed_at"] for b in backfills) and \
            all(r["state"] in TERMINAL for r in runs)

    wait_for(done, timeout, 1.0, f"backfill of {days[0]}..{days[-1]}")


@pytest.fixture(scope="module", params=["local", "celery"])
def stack(request, tmp_path_factory):
    """A running stack whose scheduled catch-up covers the last two nights only, on each
    executor: LocalExecutor, and the scale-out profile (CeleryExecutor, two workers, the raw
    partitions in the object store)."""
    now = datetime.now(UTC)
    last = last_fired_day(now)
    stack = EphemeralStack(tmp_path_factory.mktemp(f"partitions-{request.param}"),
                           start_date=(last - timedelta(days=1)).isoformat(),
                           end_date=fire_time(last).isoformat(),
                           celery=request.param == "celery")
    try:
        stack.prepare()
        for behaviour in RANGES:
            missing, done, failed = dates(behaviour)
            write_good(stack, missing)
            write_good(stack, done)
            stack.write_raw(failed, BAD_PARTITION.format(day=failed.isoformat()).encode())
        stack.start()
        stack.api.wait_dag(DAG_ID)
        yield stack
    finally:
        stack.close()


def test_a_run_triggered_with_a_partition_key_carries_it_from_its_creation(stack):
    triggered = {}
    for behaviour in RANGES:
        _, done, failed = dates(behaviour)
        for day in (done, failed):
            run = stack.api.trigger(DAG_ID, partition_key=day.isoformat())
            # the key is the run's from the REST answer on, before any task has started
            assert (run["partition_key"], run["state"], run["logical_date"]) == (
                day.isoformat(), "queued", None)
            triggered[day] = run
    for day, run in triggered.items():
        run = stack.api.wait_run(DAG_ID, run["dag_run_id"], timeout=240)
        assert run["state"] == ("failed" if day in {dates(b)[2] for b in RANGES} else "success")
    marks = stack.watermark()
    for behaviour in RANGES:
        missing, done, failed = dates(behaviour)
        assert missing.isoformat() not in marks
        assert (marks[done.isoformat()]["status"], marks[done.isoformat()]["attempt"]) == (
            "success", 1)
        assert (marks[failed.isoformat()]["status"], marks[failed.isoformat()]["attempt"]) == (
            "failed", 1)
        write_good(stack, failed)  # the partition is fixed: the next run of F succeeds


def backfill_cli(stack: EphemeralStack, behaviour: str) -> None:
    first, _, last = dates(behaviour)
    result = airflow(stack, "backfill", "create", "--dag-id", DAG_ID,
                     "--from-date", first.isoformat(), "--to-date", last.isoformat(),
                     "--reprocess-behavior", behaviour)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def backfill_rest(stack: EphemeralStack, behaviour: str) -> None:
    first, _, last = dates(behaviour)
    stack.api.request("POST", "/backfills", expect=(200,), json={
        "dag_id": DAG_ID, "from_date": f"{first.isoformat()}T00:00:00Z",
        "to_date": f"{last.isoformat()}T00:00:00Z", "reprocess_behavior": behaviour,
        "max_active_runs": 3})


#: behaviour -> (how the backfill is made, which of (missing, done, failed) it processes)
TABLE = {"none": (backfill_cli, (True, False, False)),
         "failed": (backfill_rest, (True, False, True)),
         "completed": (backfill_cli, (True, True, True))}


@pytest.mark.parametrize("behaviour", list(TABLE))
def test_a_backfill_over_partition_dates_processes_exactly_the_dates_of_its_behaviour(
        stack, behaviour):
    make, expected = TABLE[behaviour]
    days = list(dates(behaviour))
    before = stack.watermark()
    gold_before = {d: stack.gold(d) for d in days}
    started = time.monotonic()
    make(stack, behaviour)
    wait_backfill_done(stack, days)
    executor = "celery" if stack.celery else "local"
    E2E_REPORT[f"partition_backfill_{behaviour}_{executor}_s"] = time.monotonic() - started

    created = {d for d in days if runs_of(stack, d, "backfill")}
    assert created == {d for d, want in zip(days, expected, strict=True) if want}
    marks = stack.watermark()
    for day in days:
        key = day.isoformat()
        if day not in created:
            assert marks.get(key) == before.get(key), day  # untouched
            continue
        (run,) = runs_of(stack, day, "backfill")
        assert run["partition_key"] == key  # the run's Partition Key is its date
        assert run["state"] == "success", (day, task_states(stack, run))
        assert task_states(stack, run)["publish_gold"] == "success"
        assert marks[key]["status"] == "success"
        assert marks[key]["attempt"] == before.get(key, {}).get("attempt", 0) + 1
        if before.get(key, {}).get("status") == "success":  # All Runs reprocessed a done date
            assert marks[key]["checksums"] == before[key]["checksums"]
            assert stack.gold(day) == gold_before[day]
    # every run of every date, whatever made it, is found by the Partition Key filter
    for day in days:
        kinds = sorted(r["run_type"] for r in runs_of(stack, day))
        assert kinds == sorted((["manual"] if day != days[0] else []) +
                               (["backfill"] if day in created else []))


def test_a_backfill_configuration_cannot_point_every_run_at_one_date(stack):
    first = today() - timedelta(days=25)
    result = airflow(stack, "backfill", "create", "--dag-id", DAG_ID,
                     "--from-date", first.isoformat(),
                     "--to-date", (first + timedelta(days=1)).isoformat(),
                     "--dag-run-conf", json.dumps({"partition_date": dates("none")[1].isoformat()}))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    days = [first, first + timedelta(days=1)]
    before = stack.watermark()
    wait_backfill_done(stack, days)
    for day in days:
        (run,) = runs_of(stack, day, "backfill")
        assert run["state"] == "failed"
        log = stack.task_log(run["dag_run_id"], "wait_for_raw_partition", 1)
        assert "a backfill processes each run's own date" in log
    assert stack.watermark() == before


def test_clear_by_partition_key_and_by_partition_date_reruns_exactly_those_dates(stack):
    from stack.rest import wait_for

    _, done, _ = dates("none")
    window = dates("failed")[0]  # the missing date of R2, processed by its backfill
    before = stack.watermark()
    gold = stack.gold(done)
    stack.api.request("POST", f"/dags/{DAG_ID}/clearDagRuns", expect=(200,),
                      json={"partition_key": done.isoformat(), "dry_run": False})
    result = airflow(stack, "dags", "clear", DAG_ID, "--partition-date-start",
                     window.isoformat(), "--partition-date-end", window.isoformat(), "--yes")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]

    def rerun():
        marks = stack.watermark()
        if all(marks[d.isoformat()]["attempt"] == before[d.isoformat()]["attempt"] + 1
               for d in (done, window)) and all(
                r["state"] in TERMINAL for d in (done, window) for r in runs_of(stack, d)):
            return marks
        return None

    marks = wait_for(rerun, 240, 1.0, "the cleared dates to run again")
    changed = {d for d in marks if marks[d] != before.get(d)}
    assert changed == {done.isoformat(), window.isoformat()}  # exactly those dates
    for day in (done, window):
        assert marks[day.isoformat()]["status"] == "success"
        assert marks[day.isoformat()]["checksums"] == before[day.isoformat()]["checksums"]
        assert all(r["state"] == "success" for r in runs_of(stack, day))
    assert stack.gold(done) == gold


def test_an_upgrade_in_place_gives_the_runs_made_before_partitions_their_dates(stack):
    """Upgrade in place: the runs the previous release left (a partition key and no partition
    date; scheduled runs with their logical date), then airflow-init again and the services
    restarted, as after `make down`, a pull and `make up`. Without the upgrade Airflow plans a
    Missing Runs backfill over dates that have runs; after it, none, and the scheduler's next
    run stays where it was (it takes the newest run *with* a partition date as the last).

    Regression: the two nights were the last two by the clock at the test's start, so a night
    that fired after the fixture started the stack (its `end_date` is the last night then) was
    planned as missing."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from stack.ephemeral import admin_conninfo

    # the scheduled catch-up's two runs: the nights the fixture gave the stack, not the last
    # two by the clock, which moves on when a night fires while the module runs
    first = date.fromisoformat(stack.target.compose_env["TOKOKITA_START_DATE"])
    nights = (first, first + timedelta(days=1))
    next_before = stack.api.get(f"/dags/{DAG_ID}")["next_dagrun_run_after"]
    runs_before = len(stack.api.dag_runs(DAG_ID))

    def planned() -> list[str]:
        """The partition keys a Missing Runs backfill over the two nights would run (the
        dry run the Backfill dialog asks for)."""
        answer = stack.api.request("POST", "/backfills/dry_run", expect=(200,), json={
            "dag_id": DAG_ID, "from_date": f"{nights[0].isoformat()}T00:00:00Z",
            "to_date": f"{nights[1].isoformat()}T00:00:00Z", "reprocess_behavior": "none"})
        return sorted(r["partition_key"] for r in answer["backfills"])

    assert planned() == []
    metadata = make_conninfo(admin_conninfo(), dbname=stack.metadata_db)
    with psycopg.connect(metadata, autocommit=True, connect_timeout=10) as conn:
        made_before = conn.execute(
            "UPDATE dag_run SET partition_date = NULL, logical_date = CASE run_type WHEN "
            "'scheduled' THEN run_after ELSE logical_date END WHERE dag_id = %s AND "
            "partition_key IS NOT NULL RETURNING run_id", (DAG_ID,)).fetchall()
    assert len(made_before) == runs_before
    assert planned() == [str(d) for d in nights]  # what the upgrade is for

    stack.stack.stop()
    stack.stack.init()  # airflow db migrate, then the upgrade in place
    stack.stack.start()
    stack.stack.wait_healthy(180)
    with psycopg.connect(metadata, autocommit=True, connect_timeout=10) as conn:
        undated = conn.execute("SELECT count(*) FROM dag_run WHERE dag_id = %s AND "
                               "partition_key IS NOT NULL AND partition_date IS NULL",
                               (DAG_ID,)).fetchone()[0]
    assert undated == 0
    assert planned() == []
    time.sleep(10)  # a few loops of the restarted dag-processor and scheduler
    assert stack.api.get(f"/dags/{DAG_ID}")["next_dagrun_run_after"] == next_before
    assert len(stack.api.dag_runs(DAG_ID)) == runs_before  # no second catch-up
