"""Fixtures for running the DAG through real Airflow task execution (`dag.test()`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from tests.airflow_support import REPO, allow_deadline_alerts_in_dag_test, ensure_metadata_db
from tokokita_etl.orders.pipeline import ORDERS


@dataclass
class Project:
    """A throw-away project root (config + raw data) that the Airflow tasks run against."""

    root: Path

    @property
    def raw(self) -> Path:
        return self.root / "data" / "raw"

    @property
    def state_file(self) -> Path:
        return self.root / "data" / "state" / "state.json"

    def gold(self, day: str) -> Path:
        return self.root / "data" / "gold" / f"summary_harian_{day}.csv"

    def manifests(self, day: str) -> list[Path]:
        runs = (self.root / "data" / "state" / "runs").glob(f"run-{day}-*.json")
        return sorted(runs, key=lambda p: p.stat().st_mtime_ns)

    def fail_from_the_command_line(self, day: str, times: int) -> None:
        """Record `times` failed attempts of `day` (its partition must be unusable) as
        `tokokita-etl run --date day` does, with the settings the tasks read: a date failed or
        blocked in the shared watermark without a DAG run per attempt (each failed DAG run
        costs `dag.test()` a second per task left to mark upstream_failed)."""
        from tokokita_airflow.runtime import pipeline_settings
        from tokokita_etl.runner.sequence import run_for_date

        settings = pipeline_settings(ORDERS)
        for _ in range(times):
            outcome = run_for_date(ORDERS, settings, date.fromisoformat(day), log=lambda _: None)
            assert outcome.status == "failed", outcome


@pytest.fixture
def project(tmp_path, monkeypatch) -> Project:
    root = tmp_path / "project"
    (root / "data" / "raw").mkdir(parents=True)
    shutil.copytree(REPO / "config", root / "config")
    for path in (REPO / "data" / "raw").glob("pesanan_*.csv"):
        shutil.copy(path, root / "data" / "raw" / path.name)
    monkeypatch.setenv("TOKOKITA_HOME", str(root))
    for var in ("TOKOKITA_CONFIG", "TOKOKITA_WAREHOUSE_URL", "TOKOKITA_RAW_DIR",
                "TOKOKITA_STATE_DIR", "TOKOKITA_GOLD_DIR"):
        monkeypatch.delenv(var, raising=False)
    # the tasks read the warehouse from its Airflow connection (`warehouse_conn_id`): the
    # project's SQLite file
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps(
        {"conn_type": "sqlite", "host": str(root / "data" / "warehouse" / "tokokita.db")}))
    return Project(root)


@pytest.fixture(autouse=True)
def storage_options_of_the_test():
    """The object-storage options a test's tasks took from a connection end with the test
    (`storage.use_options` holds them for the process)."""
    yield
    from tokokita_etl.storage import use_options

    use_options("s3", None)


@pytest.fixture
def daily_dag(monkeypatch):
    """The DAG as Airflow's DagBag parses it from dags/ (fresh per test: runs mutate params);
    `dag.test()` of it copes with its deadline alert (`allow_deadline_alerts_in_dag_test`)."""
    ensure_metadata_db()
    allow_deadline_alerts_in_dag_test(monkeypatch)
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(REPO / "dags"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["tokokita_orders_daily"]
    for task in dag.tasks:
        task.retry_delay = timedelta(0)  # retries happen at once inside dag.test()
    return dag


@pytest.fixture
def run_dag(daily_dag, monkeypatch) -> Callable:
    """Run the DAG once with `dag.test()`, as a run of the given type; return task states.

    Airflow 3.3.2 has no public way to make a scheduled or backfill run in-process: `dag.test()`
    always makes a manual one through `airflow.models.dagrun.get_or_create_dagrun`, which is
    patched here to create the run of the given type instead, with its partition key (the
    timetable's D of the fire time `logical_date`, or `partition_key`) and no logical date, as
    the scheduler and the backfill create them; a manual run with `partition_key` is one
    triggered with that key."""
    from airflow.models import dagrun as dagrun_module
    from airflow.utils.types import DagRunType

    original = dagrun_module.get_or_create_dagrun

    def run(logical_date: datetime | None, *, run_type: str = "manual", conf: dict | None = None,
            run_after: datetime | None = None, partition_key: str | None = None):
        kind = DagRunType(run_type)

        def create(**kwargs):
            from airflow.models.dagrun import DagRun
            from airflow.utils.state import DagRunState

            session, dag = kwargs["session"], kwargs["dag"]
            key, logical = partition_key, kwargs["logical_date"]
            if key is None and kind is not DagRunType.MANUAL and logical is not None:
                # the scheduler's and a backfill's runs carry D from the timetable
                key = dag.timetable._get_partition_info(logical)[1]
            if key is None and kind is DagRunType.MANUAL:
                return original(**kwargs)
            fire = kwargs["run_after"] if logical is None else logical
            run_id = DagRun.generate_run_id(run_type=kind, logical_date=None, run_after=fire)
            existing = session.query(DagRun).filter_by(dag_id=dag.dag_id,
                                                       run_id=run_id).one_or_none()
            if existing:
                session.delete(existing)
                session.commit()
            return dag.create_dagrun(
                run_id=run_id, logical_date=None, data_interval=None, run_after=fire,
                partition_key=key, partition_date=dag.timetable.resolve_partition_date(key),
                conf=kwargs["conf"], run_type=kind, state=DagRunState.RUNNING,
                triggered_by=kwargs["triggered_by"],
                triggering_user_name=kwargs["triggering_user_name"],
                start_date=kwargs["start_date"], session=session)

        monkeypatch.setattr(dagrun_module, "get_or_create_dagrun", create)
        dr = daily_dag.test(logical_date=logical_date, run_conf=conf, run_after=run_after)
        states = {ti.task_id: (ti.state, ti.try_number) for ti in dr.get_task_instances()}
        return dr, states

    return run


@pytest.fixture
def pings(monkeypatch):
    """A local ping server (tests/ping_server.py) that `ping_url` points at."""
    from tests.ping_server import PingServer

    server = PingServer().start()
    monkeypatch.setenv("TOKOKITA_PING_URL", f"{server.url}/ping/abc")
    yield server
    server.stop()
