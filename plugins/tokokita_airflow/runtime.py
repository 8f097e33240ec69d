"""What every TokoKita task needs from its context: settings, partition date, run identity."""

from __future__ import annotations

import os
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tokokita_etl.runner.declaration import Pipeline
    from tokokita_etl.settings.model import Settings

#: the claim owner of an Airflow run: `airflow:<dag_id>:<run_id>`
OWNER_PREFIX = "airflow:"


def project_root() -> Path:
    """Where config/ lives and relative paths resolve in Airflow tasks: $TOKOKITA_HOME or the repo."""
    return Path(os.environ.get("TOKOKITA_HOME") or Path(__file__).resolve().parents[2])


def configured_settings(pipeline: Pipeline) -> Settings:
    """`pipeline`'s settings (config file + TOKOKITA_* env), relative paths against the project
    root, with the URLs as configured (no Airflow connection read)."""
    from tokokita_etl.pipelines import settings_of

    return settings_of(pipeline, cwd=project_root(), in_airflow=True)


def pipeline_settings(pipeline: Pipeline) -> Settings:
    """The settings the tasks, the retry policy and the status page use: `configured_settings`
    with the warehouse and state database of their Airflow connections and the object
    store's connection given to the storage (`tokokita_airflow.connections`). A missing or
    unusable connection fails the task at once (`connections.ConnectionProblem`)."""
    from tokokita_airflow.connections import resolve

    settings = resolve(configured_settings(pipeline), root=project_root())
    if pipeline.upstream is not None:  # its upstream's warehouse and state, from theirs
        settings = settings.with_upstream(pipeline_settings(pipeline.upstream.pipeline))
    return settings


def shared_settings() -> Settings:
    """The settings every pipeline shares (the zone, `declarations`, the connections' ids),
    read as the default pipeline's."""
    from tokokita_etl.pipelines import DEFAULT, by_name

    return configured_settings(by_name(DEFAULT))


def every_pipeline() -> dict[str, Pipeline]:
    """Every pipeline the runner serves here, by name: the package's own and the declared."""
    from tokokita_etl.pipelines import every

    return every(shared_settings().declarations)


def pipeline_of_dag(dag_id: str) -> Pipeline | None:
    """The pipeline whose DAG is `dag_id`, or None (not a pipeline's DAG)."""
    from tokokita_etl.pipelines import by_dag_id

    return by_dag_id(dag_id, shared_settings().declarations)


def run_anchor(context: Context) -> datetime:
    """The run's scheduled fire time (logical date), or when it was queued if it has none."""
    dag_run = context["dag_run"]
    return dag_run.logical_date or dag_run.run_after


def partition_date_of(dag_run: Any, tz: str, grain: Any = None) -> date:
    """Partition date D of a DAG run: its partition key (every run of the DAG carries one from
    its creation: the timetable's for scheduled and backfill runs, the trigger's for a manual
    run), else, for a manual run triggered without one, the day before it was queued in `tz`
    (the pipeline's time zone); a key must start a partition of the pipeline's `grain`
    (default daily)."""
    from tokokita_etl.runner.schedule import DAILY, partition_date_for_run

    anchor = dag_run.logical_date or dag_run.run_after
    return partition_date_for_run(anchor, tz, getattr(dag_run, "partition_key", None),
                                  grain or DAILY)


def refuse_run_conf(context: Context) -> None:
    """Fail the task without retry when the policy refuses the run's configuration
    (`policy.run_conf_problem`: a `partition_date` other than the run's partition key) or its
    partition key is not a date as `YYYY-MM-DD` (`schedule.parse_partition_key`)."""
    from airflow.sdk.exceptions import AirflowFailException

    from tokokita_etl.errors import ConfigError
    from tokokita_etl.runner.policy import run_conf_problem
    from tokokita_etl.runner.schedule import parse_partition_key

    dag_run = context["dag_run"]
    key = getattr(dag_run, "partition_key", None)
    problem = run_conf_problem(run_type(context), getattr(dag_run, "conf", None), key)
    if problem:
        raise AirflowFailException(problem)
    if key:
        try:
            parse_partition_key(key)
        except ConfigError as exc:
            raise AirflowFailException(str(exc)) from None


def partition_date(context: Context, settings: Settings, grain: Any = None) -> date:
    """Partition date D of the running task's DAG run (`refuse_run_conf` first), in the time
    zone of the pipeline's `settings`."""
    refuse_run_conf(context)
    return partition_date_of(context["dag_run"], settings.timezone, grain)


def run_cleared(context: Context) -> bool:
    """Whether this run is a person's request to run its date again: they cleared the run or
    one of its tasks (Airflow counts the clears of a run in `clear_number`), or it is a
    backfill run. Airflow's backfill of a partitioned DAG creates a run only for the dates its
    reprocess behaviour selects (Missing Runs: no run yet; Missing and Errored: also a failed
    latest run; All Runs: every date) and, for a date that has one, a new run beside the old
    one instead of clearing it, so its runs re-run their dates as Clear does."""
    dag_run = context["dag_run"]
    return bool(getattr(dag_run, "clear_number", 0)) or run_type(context) == "backfill"


def run_owner(context: Context) -> str:
    """Who holds the partition claim: this DAG run."""
    return dag_run_owner(context["dag_run"])


def dag_run_owner(dag_run: Any) -> str:
    """The claim holder name of a DAG run: `airflow:<dag_id>:<run_id>`."""
    return f"{OWNER_PREFIX}{dag_run.dag_id}:{dag_run.run_id}"


def run_type(context: Context) -> str:
    """`scheduled`, `manual`, `backfill` or `asset_triggered`."""
    value = context["dag_run"].run_type
    return getattr(value, "value", value)


def flag(value: Any) -> bool:
    """A boolean param as given in a trigger form, a REST body or a template."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def run_flag(context: Context, name: str) -> bool:
    """The run's `force` or `reset_attempts` param."""
    return flag((context.get("params") or {}).get(name))


def holder_finished(owner: str) -> bool | None:
    """Whether the claim holder `owner` has ended: asks Airflow for an Airflow run's state.

    A run that is no longer queued or running (finished, marked, or deleted) holds nothing;
    command-line holders are checked by the package.
    """
    if not owner.startswith(OWNER_PREFIX):
        from tokokita_etl.runner.liveness import cli_holder_finished

        return cli_holder_finished(owner)
    from airflow.sdk.exceptions import AirflowRuntimeError
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    dag_id, _, run_id = owner.removeprefix(OWNER_PREFIX).partition(":")
    try:
        state = RuntimeTaskInstance.get_dagrun_state(dag_id=dag_id, run_id=run_id)
    except AirflowRuntimeError as exc:
        if "404" in str(exc) or "not found" in str(exc).lower():
            return True  # the run was deleted
        return None
    return str(getattr(state, "value", state)) not in ("queued", "running")
