"""The DAG-run listener called directly, as the scheduler calls it when a run ends (and the
API when a person marks a run): with a run (the fields the scheduler's DagRun has) whose `dag`
is the TokoKita DAG or another one; claims in the `project` fixture's real state folder."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, date, datetime
from types import SimpleNamespace

import pytest

from tokokita_airflow import listeners
from tokokita_airflow.listeners import on_dag_run_failed, on_dag_run_success, run_partition
from tokokita_airflow.runtime import pipeline_settings
from tokokita_airflow.timetable import DailyPartitionTimetable, PartitionDateTimetable
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner.claims import claim_date, read_claim

JKT = "Asia/Jakarta"
TOKOKITA = SimpleNamespace(timetable=DailyPartitionTimetable("30 2 * * *", timezone=JKT))


def ended_run(*, partition_key=None, dag=TOKOKITA, run_id="manual__x"):
    return SimpleNamespace(dag_id="tokokita_orders_daily", run_id=run_id, dag=dag,
                           conf={}, logical_date=None,
                           run_after=datetime(2026, 12, 1, 3, 0, tzinfo=UTC),
                           partition_key=partition_key)


def starting_run(*, run_id: str, conf: dict, partition_key=None, dag=TOKOKITA):
    run = ended_run(partition_key=partition_key, dag=dag, run_id=run_id)
    run.conf, run.partition_date = conf, None
    return run


def test_a_starting_run_of_the_sweep_gets_the_partition_key_its_configuration_names():
    """Airflow's task SDK triggers a run without a partition key: a run the sweep made gets
    its date's key and partition date (D's local midnight, as the timetable gives) when it
    starts."""
    run = starting_run(run_id="sweep__2026-11-02__0123456789abcdef",
                       conf={"partition_date": "2026-11-02"})
    listeners.on_dag_run_running(dag_run=run, msg="started")
    assert run.partition_key == "2026-11-02"
    assert run.partition_date == datetime(2026, 11, 1, 17, 0, tzinfo=UTC)
    assert run_partition(run) == date(2026, 11, 2)


@pytest.mark.parametrize(("run_id", "conf", "key", "dag"), [
    ("manual__x", {"partition_date": "2026-11-02"}, None, TOKOKITA),  # a person's run
    ("sweep__2026-11-02__0", {"partition_date": "2026-11-02"}, "2026-11-03", TOKOKITA),
    ("sweep__2026-11-02__0", {"partition_date": "02/11/2026"}, None, TOKOKITA),
    ("sweep__2026-11-02__0", {}, None, TOKOKITA),
    ("sweep__2026-11-02__0", {"partition_date": "2026-11-02"}, None,
     SimpleNamespace(timetable=object())),  # another DAG
], ids=["manual-run", "has-a-key", "bad-date", "no-date", "another-dag"])
def test_the_listener_sets_nothing_on_any_other_starting_run(run_id, conf, key, dag):
    """Every other run carries its partition key from its creation (the timetable, the
    trigger's partition key), or is refused by its tasks, naming the key to use."""
    run = starting_run(run_id=run_id, conf=conf, partition_key=key, dag=dag)
    listeners.on_dag_run_running(dag_run=run, msg="started")
    assert (run.partition_key, run.partition_date) == (key, None)


def test_a_run_processes_its_partition_key_or_yesterday_of_when_it_was_queued():
    assert run_partition(ended_run(partition_key="2026-11-02")) == date(2026, 11, 2)
    # queued 2026-12-01 03:00 UTC = 10:00 in Jakarta: yesterday is 11-30
    assert run_partition(ended_run()) == date(2026, 11, 30)
    # a run of a DAG version serialized before partitions (the previous timetable's name)
    old = SimpleNamespace(timetable=PartitionDateTimetable("30 2 * * *", timezone=JKT))
    assert run_partition(ended_run(partition_key="2026-11-02", dag=old)) == date(2026, 11, 2)


def test_a_run_of_another_dag_or_with_a_bad_key_has_no_date():
    assert run_partition(ended_run(partition_key="2026-11-02",
                                   dag=SimpleNamespace(timetable=object()))) is None
    assert run_partition(ended_run(partition_key="02/11/2026")) is None


def test_an_ended_run_releases_its_claim_on_its_date_and_no_other_runs(project):
    """Bug: a run that ended while it still held its date's claim (a stage cleared without
    its downstream tasks; a run marked success while a stage ran) left the claim until its
    TTL, so `status`, `due` and the status page said the date was being processed."""
    settings = pipeline_settings(ORDERS)
    day, now = date(2026, 11, 2), datetime.now(UTC)
    ended = ended_run(partition_key=day.isoformat())
    owner = f"airflow:{ended.dag_id}:{ended.run_id}"
    claim_date(settings, day, owner, now, lambda _owner: False)
    other = ended_run(partition_key="2026-11-03", run_id="manual__y")
    claim_date(settings, date(2026, 11, 3), "airflow:tokokita_orders_daily:manual__z", now,
               lambda _owner: False)

    on_dag_run_success(dag_run=other, msg="success")  # holds nothing: nothing changes
    assert read_claim(settings, day).owner == owner
    assert read_claim(settings, date(2026, 11, 3)) is not None
    on_dag_run_failed(dag_run=ended_run(partition_key=day.isoformat(),
                                        dag=SimpleNamespace(timetable=object())),
                      msg="failed")  # another DAG's run
    assert read_claim(settings, day).owner == owner

    on_dag_run_success(dag_run=ended, msg="Dag Run's state was manually set to `success`.")
    assert read_claim(settings, day) is None
    assert read_claim(settings, date(2026, 11, 3)) is not None
    claim_date(settings, day, owner, now, lambda _owner: False)
    on_dag_run_failed(dag_run=ended, msg="task_failure")
    assert read_claim(settings, day) is None


@pytest.mark.postgres
def test_an_ended_run_whose_state_is_an_airflow_connection_is_left_to_the_next_run(
        project, monkeypatch):
    """Regression: the listener read the state database's Airflow connection inside the
    scheduler's call; where connections live in the metadata database that used and closed
    the scheduler's own session, whose next use of the run failed (DetachedInstanceError)
    and stopped the scheduler loop. With the state behind a connection the listener reads
    no connection: the claim, here in a real PostgreSQL state database, stays for the next
    run of the date to take over."""
    from sqlalchemy.engine import make_url

    from tokokita_etl.runner.stores import state_store
    from tokokita_etl.runner.stores.database import CLAIMS, MANIFESTS, WATERMARK

    server = make_url(os.environ["TOKOKITA_TEST_PG_URL"])
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_STATE",
                       server.set(drivername="postgres").render_as_string(hide_password=False))
    monkeypatch.setenv("TOKOKITA_STATE_CONN_ID", "tokokita_state")
    monkeypatch.setenv("TOKOKITA_PIPELINE", f"test-{uuid.uuid4().hex[:12]}")
    settings = pipeline_settings(ORDERS)
    assert settings.state_db_url, "the state is the connection's database"
    day, now = date(2026, 11, 2), datetime.now(UTC)
    ended = ended_run(partition_key=day.isoformat())
    owner = f"airflow:{ended.dag_id}:{ended.run_id}"
    try:
        claim_date(settings, day, owner, now, lambda _owner: False)
        on_dag_run_success(dag_run=ended, msg="success")
        assert read_claim(settings, day).owner == owner
    finally:
        store = state_store(settings)
        with store.database.begin() as conn:
            for table in (WATERMARK, CLAIMS, MANIFESTS):
                conn.exec_driver_sql(f"DELETE FROM {table} WHERE pipeline = %(p)s",
                                     {"p": settings.pipeline})


def test_an_ended_run_releases_the_claim_in_the_state_of_its_dags_pipeline(project, monkeypatch):
    """A run of a declared pipeline's DAG releases its claim in that pipeline's state, never
    the orders' claim on the same date; a DAG on the timetable that is no pipeline's is left
    alone."""
    from stock_pipeline import STOCK

    monkeypatch.setenv("TOKOKITA_DECLARATIONS", "stock_pipeline:STOCK")
    orders, stock = pipeline_settings(ORDERS), pipeline_settings(STOCK)
    day, now = date(2026, 11, 2), datetime.now(UTC)
    stock_run = SimpleNamespace(**{**vars(ended_run(partition_key=day.isoformat())),
                                   "dag_id": STOCK.dag_id})
    unknown_run = SimpleNamespace(**{**vars(stock_run), "dag_id": "someone_elses_dag"})
    same_owner = f"airflow:{STOCK.dag_id}:{stock_run.run_id}"
    claim_date(stock, day, same_owner, now, lambda _owner: False)
    claim_date(orders, day, "airflow:tokokita_orders_daily:manual__z", now, lambda _owner: False)

    on_dag_run_success(dag_run=unknown_run, msg="success")
    assert read_claim(stock, day).owner == same_owner
    on_dag_run_failed(dag_run=stock_run, msg="task_failure")
    assert read_claim(stock, day) is None
    assert read_claim(orders, day).owner == "airflow:tokokita_orders_daily:manual__z"
