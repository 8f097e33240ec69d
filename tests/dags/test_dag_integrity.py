"""DAG integrity: every DAG file imports through Airflow's DagBag, with the promised shape."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from datetime import timedelta

import pytest

from tests.airflow_support import AIRFLOW_ENV, REPO

HEAVY_MODULES = ("duckdb", "pyarrow", "psycopg", "tokokita_etl.runner.sequence",
                 "tokokita_etl.orders.extract", "tokokita_etl.orders.transform", "tokokita_etl.orders.load",
                 "tokokita_etl.warehouse.database")


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(str(REPO / "dags"))


def test_every_dag_file_imports_without_errors(dagbag):
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == {"tokokita_orders_daily", "tokokita_weekly_city_report",
                                   "tokokita_monthly_city_report", "tokokita_sweep"}


def test_the_monthly_dag_runs_one_month_a_run_keyed_by_its_first_day_after_its_days_settle(
        dagbag):
    from tokokita_airflow.sensors import UpstreamSettledSensor

    dag = dagbag.dags["tokokita_monthly_city_report"]
    fields = dag.timetable.serialize()
    assert (fields["expression"], fields["timezone"], fields["grain"]) == (
        "0 5 2 * *", "Asia/Jakarta", "monthly")
    assert dag.timetable.summary == "0 5 2 * * (processes the month before)"
    assert [task.task_id for task in dag.tasks] == [
        "wait_for_inputs", "check_watermark", "collect", "load", "validate", "publish_gold"]
    assert isinstance(dag.get_task("wait_for_inputs"), UpstreamSettledSensor)


def test_every_task_of_every_dag_is_retried_at_least_twice(dagbag):
    """Regression: the sweep DAG had no retries (a template DAG test that teams copy into CI
    asks every DAG for retries >= 2); the stages' retry policies still decide which failures
    are retried."""
    for dag in dagbag.dags.values():
        for task in dag.tasks:
            assert task.retries >= 2, (dag.dag_id, task.task_id, task.retries)
    sweep = dagbag.dags["tokokita_sweep"]
    assert {task.retry_delay for task in sweep.tasks} == {timedelta(minutes=1)}


def test_the_weekly_dag_runs_one_week_a_run_keyed_by_its_monday_after_its_days_settle(dagbag):
    from tokokita_airflow.sensors import UpstreamSettledSensor

    dag = dagbag.dags["tokokita_weekly_city_report"]
    fields = dag.timetable.serialize()
    assert (fields["expression"], fields["timezone"], fields["grain"]) == (
        "0 4 * * 1", "Asia/Jakarta", "weekly")
    assert "grain" not in dagbag.dags["tokokita_orders_daily"].timetable.serialize()
    assert dag.timetable.summary == "0 4 * * 1 (processes the week before)"
    order = ["wait_for_inputs", "check_watermark", "collect", "load", "validate",
             "publish_gold"]
    assert [t.task_id for t in dag.topological_sort()] == order
    wait = dag.get_task("wait_for_inputs")
    assert isinstance(wait, UpstreamSettledSensor)
    assert (wait.mode, wait.poke_interval, wait.wait_window) == (
        "reschedule", 60, timedelta(hours=24))
    assert dag.catchup is True and set(dag.tags) == {"tokokita", "report", "weekly"}
    assert {t.pipeline.name for t in dag.tasks} == {"weekly_city_report"}
    assert [o.name for o in dag.get_task("publish_gold").outlets] == ["tokokita_summary_mingguan"]


def test_daily_dag_schedule_zone_catchup_owner_retries_and_tags(dagbag):
    from airflow.timetables.trigger import CronPartitionTimetable

    from tokokita_etl.pipelines import load_settings

    dag = dagbag.dags["tokokita_orders_daily"]
    settings = load_settings(cwd=REPO)
    assert isinstance(dag.timetable, CronPartitionTimetable)  # Airflow's, one key per day
    fields = dag.timetable.serialize()
    assert fields["expression"] == settings.cron == "30 2 * * *"
    assert fields["timezone"] == settings.timezone == "Asia/Jakarta"
    assert (fields["run_offset"], fields["key_format"]) == (-1, "%Y-%m-%d")
    assert dag.end_date is None  # a manual run at any date has its tasks
    assert dag.catchup is True
    assert dag.max_active_runs == 3
    assert dag.is_paused_upon_creation is False
    assert set(dag.tags) == {"tokokita", "etl", "orders"}
    assert dag.doc_md and "D+1 02:30" in dag.doc_md
    for task in dag.tasks:
        assert task.owner == "tokokita-data"
    for stage in ("extract", "transform", "load", "validate", "publish_gold"):
        task = dag.get_task(stage)
        assert task.retries == 2
        assert task.retry_delay == timedelta(minutes=1)
        assert task.retry_exponential_backoff == 2.0
        assert task.retry_policy is not None
    gate = dag.get_task("check_watermark")  # retried only when the state cannot be reached
    assert (gate.retries, gate.retry_delay) == (2, timedelta(minutes=1))
    assert type(gate.retry_policy).__name__ == "GateRetryPolicy"


def test_daily_dag_task_order(dagbag):
    dag = dagbag.dags["tokokita_orders_daily"]
    order = ["wait_for_raw_partition", "check_watermark", "extract", "transform", "load",
             "validate", "publish_gold"]
    assert [t.task_id for t in dag.topological_sort()] == order
    for upstream, downstream in itertools.pairwise(order):
        assert dag.get_task(downstream).upstream_task_ids == {upstream}
    assert dag.get_task("wait_for_raw_partition").mode == "reschedule"


def test_daily_dag_params_for_the_trigger_form_name_no_date(dagbag):
    """Regression: a `partition_date` param typed into the Backfill dialog pointed every run
    of the range at one date, and with *Override parameters on existing runs* rewrote the
    existing runs' configuration into failures. The date is the run's partition key."""
    params = dagbag.dags["tokokita_orders_daily"].params
    assert set(params) == {"force", "reset_attempts"}
    assert params["force"] is False and params["reset_attempts"] is False
    for name in ("force", "reset_attempts"):
        param = params.get_param(name)
        assert param.schema["type"] == ["boolean", "null"]  # the form shows it as optional
        assert param.description
    # Airflow 3.3's Backfill dialog sends the toggles only with "Override parameters on
    # existing runs" ticked: the descriptions, shown under the toggles, say what that means
    assert "A backfill reprocesses its dates without it" in params.get_param("force").description
    assert ('In the Backfill dialog it is sent only when "Override parameters on existing runs" '
            'is ticked') in params.get_param("reset_attempts").description


def test_gold_asset_is_an_outlet_of_publish_gold(dagbag):
    task = dagbag.dags["tokokita_orders_daily"].get_task("publish_gold")
    assert [a.name for a in task.outlets] == ["tokokita_summary_harian"]


def test_parsing_the_dag_file_imports_nothing_heavy_and_reads_only_the_config_file():
    """Parse in a fresh interpreter and list which heavy modules it imported and which files
    of the project it opened (every open, through an audit hook): the settings file only."""
    probe = f"""
import json, sys
opened = []
sys.path[:0] = [{str(REPO / 'plugins')!r}, {str(REPO / 'include')!r}]
import airflow.sdk  # noqa: F401  (Airflow itself may read its own config)
def spy(event, args):
    if event == "open" and isinstance(args[0], str):
        opened.append(args[0])
sys.addaudithook(spy)
import importlib.util
dag_file = {str(REPO / 'dags' / 'tokokita_orders_daily.py')!r}
spec = importlib.util.spec_from_file_location("dag_under_test", dag_file)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps({{"heavy": [m for m in {list(HEAVY_MODULES)!r} if m in sys.modules],
                   "opened": opened}}))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env={**AIRFLOW_ENV, "PATH": "/usr/bin:/bin"})
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    project = [path for path in result["opened"]
               if path.startswith(str(REPO)) and not path.startswith(str(REPO / ".venv"))
               and not path.endswith((".py", ".pyc")) and "__pycache__" not in path]
    assert project == [str(REPO / "config" / "pipeline.yaml")]


def test_the_dag_reads_the_config_file_and_the_environment_when_it_is_parsed(tmp_path):
    """Regression: the DAG file read its schedule from the environment only, so cron,
    timezone or the catch-up window written in config/pipeline.yaml did not reach Airflow."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "pipeline.yaml").write_text(
        "cron: 0 4 * * *\ntimezone: UTC\nstart_date: 2026-10-01\ndeadline_local_time: '07:30'\n",
        encoding="utf-8")
    probe = f"""
import json, sys
sys.path[:0] = [{str(REPO / 'plugins')!r}, {str(REPO / 'include')!r}]
import runpy
dag = runpy.run_path({str(REPO / 'dags' / 'tokokita_orders_daily.py')!r})["dag"]
fields = dag.timetable.serialize()
print(json.dumps([fields["expression"], fields["timezone"], dag.start_date.isoformat(),
                  dag.get_task("wait_for_raw_partition").wait_window.total_seconds()]))
"""
    env = {**AIRFLOW_ENV, "PATH": "/usr/bin:/bin", "TOKOKITA_HOME": str(tmp_path),
           "TOKOKITA_WAIT_WINDOW_HOURS": "2"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env=env)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [
        "0 4 * * *", "UTC", "2026-10-01T00:00:00+00:00", 7200.0]


def test_a_declared_pipeline_gets_its_dag_with_its_own_schedule_and_stages(tmp_path):
    """`declarations` names the stock pipeline of the tests: `dags/tokokita_declared.py` builds
    its DAG (its stages after the sensor and the gate, its cron, the orders' retries and
    params), and the orders DAG is unchanged beside it."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "pipeline.yaml").write_text(
        "cron: 45 1 * * *\npipelines:\n  stock:\n    wait_window_hours: 3\n", encoding="utf-8")
    probe = f"""
import json, sys
sys.path[:0] = [{str(REPO / 'plugins')!r}, {str(REPO / 'include')!r}, {str(REPO / 'tests')!r}]
from airflow.dag_processing.dagbag import DagBag
bag = DagBag({str(REPO / 'dags')!r})
out = {{"errors": sorted(bag.import_errors)}}
for dag in bag.dags.values():
    if dag.dag_id == "tokokita_sweep":
        continue
    out[dag.dag_id] = {{
        "cron": dag.timetable.serialize()["expression"], "tags": sorted(dag.tags),
        "tasks": [t.task_id for t in dag.topological_sort()],
        "pipelines": sorted({{t.pipeline.name for t in dag.tasks}}),
        "wait_h": dag.topological_sort()[0].wait_window.total_seconds() / 3600,
        "retries": sorted({{t.retries for t in dag.tasks}}), "params": sorted(dag.params),
        "doc": dag.doc_md.splitlines()[0]}}
print(json.dumps(out))
"""
    env = {**AIRFLOW_ENV, "PATH": "/usr/bin:/bin", "TOKOKITA_HOME": str(tmp_path),
           "TOKOKITA_DECLARATIONS": "stock_pipeline:STOCK"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env=env)
    dags = json.loads(out.stdout.strip().splitlines()[-1])
    assert dags.pop("errors") == []
    assert dags["tokokita_stock_daily"] == {
        "cron": "0 3 * * *", "tags": ["stock", "tokokita"],
        "tasks": ["wait_for_raw_partition", "check_watermark", "count", "publish"],
        "pipelines": ["stock"], "wait_h": 3.0, "retries": [2],
        "params": ["force", "reset_attempts"], "doc": "# stock"}
    orders = dags["tokokita_orders_daily"]
    assert (orders["cron"], orders["pipelines"], orders["wait_h"]) == ("45 1 * * *", ["orders"], 6.0)
    assert orders["tasks"][2:] == ["extract", "transform", "load", "validate", "publish_gold"]


def test_the_sweep_dag_runs_on_sweep_cron_in_the_shared_zone_without_catch_up(tmp_path):
    """`dags/tokokita_sweep.py` builds the sweep DAG (the weekly city report, built from the
    orders' results, always needs it) on `sweep_cron`, in the shared zone, without catch-up."""
    probe = f"""
import json, sys
sys.path[:0] = [{str(REPO / 'plugins')!r}, {str(REPO / 'include')!r}, {str(REPO / 'tests')!r}]
from airflow.dag_processing.dagbag import DagBag
bag = DagBag({str(REPO / 'dags' / 'tokokita_sweep.py')!r})
out = {{"errors": sorted(bag.import_errors)}}
for dag in bag.dags.values():
    out[dag.dag_id] = {{
        "cron": dag.timetable.serialize()["expression"],
        "zone": dag.timetable.serialize()["timezone"], "catchup": dag.catchup,
        "tasks": [t.task_id for t in dag.topological_sort()],
        "max_active_runs": dag.max_active_runs}}
print(json.dumps(out))
"""
    base = {**AIRFLOW_ENV, "PATH": "/usr/bin:/bin", "TOKOKITA_HOME": str(tmp_path)}

    def sweep_dags(**env: str) -> dict:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             check=True, env={**base, **env})
        found = json.loads(out.stdout.strip().splitlines()[-1])
        assert found.pop("errors") == []
        return found

    expected = {"tokokita_sweep": {
        "cron": "15 * * * *", "zone": "Asia/Jakarta", "catchup": False,
        "tasks": ["find_changed_partitions", "trigger_runs"], "max_active_runs": 1}}
    assert sweep_dags() == expected
    assert sweep_dags(TOKOKITA_ON_RAW_CHANGE="reprocess") == expected
    assert sweep_dags(TOKOKITA_DECLARATIONS="stock_pipeline:STOCK",
                      TOKOKITA_STOCK__ON_RAW_CHANGE="reprocess",
                      TOKOKITA_SWEEP_CRON="*/5 * * * *") == {
        "tokokita_sweep": {**expected["tokokita_sweep"], "cron": "*/5 * * * *"}}
