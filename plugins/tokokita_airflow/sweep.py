"""`sweep_dag`: the DAG that runs again the partitions whose inputs changed after their run.

A pipeline's timetable makes one run per partition; a done date whose raw file changed since
(`on_raw_change: reprocess`), a week whose days' results changed since it was built, or whose
run gave up waiting for its days, has none coming. On `sweep_cron` (hourly by default), the task
`find_changed_partitions` asks the runner (`runner.propagation.sweep`) for every pipeline's
such partitions, and `trigger_runs` (Airflow's `TriggerDagRunOperator`, one mapped task
instance a partition) makes one run of the pipeline's DAG for each: its run id names the
partition and what the need rests on (`sweep__<D>__<digest>`, so the same need never makes a
second run), its note says why, its configuration names the date; the listener gives it
that date as its partition key when it starts. The run's gate and stages process the partition
again because its inputs changed, exactly as `tokokita-etl run --date D` does.

The DAG exists while some pipeline is built from another's results (the weekly city report)
or has `on_raw_change: reprocess`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import DAG

SWEEP_DAG_ID = "tokokita_sweep"
FIND_TASK, TRIGGER_TASK = "find_changed_partitions", "trigger_runs"


def sweeping_pipelines() -> list[Any]:
    """The pipelines whose changed inputs the sweep looks for: those built from another's
    results, and those with `on_raw_change: reprocess`."""
    from tokokita_airflow.runtime import configured_settings, every_pipeline
    from tokokita_etl.runner.settings import on_raw_change

    return [pipeline for pipeline in every_pipeline().values()
            if pipeline.upstream is not None
            or on_raw_change(configured_settings(pipeline)) == "reprocess"]


def changed_partitions() -> list[dict[str, Any]]:
    """What `trigger_runs` is given: one run of a pipeline's DAG per partition due again,
    read with the settings its tasks have (the state and warehouse of their connections)."""
    from tokokita_airflow.runtime import pipeline_settings
    from tokokita_etl.runner.propagation import sweep
    from tokokita_etl.runner.schedule import utc_now

    now = utc_now()
    return [{"trigger_dag_id": need.dag_id, "trigger_run_id": need.run_id,
             "conf": {"partition_date": need.key.isoformat()},
             "note": f"sweep: {need.key} {need.reason}"}
            for pipeline in sweeping_pipelines()
            for need in sweep(pipeline, pipeline_settings(pipeline), now)]


def sweep_dag(*, doc_md: str | None = None) -> DAG | None:
    """The sweep DAG, or None when no pipeline needs it (`sweeping_pipelines`)."""
    if not sweeping_pipelines():
        return None
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
    from airflow.sdk import DAG, task
    from airflow.timetables.trigger import CronTriggerTimetable

    from tokokita_airflow.dag import DEFAULT_ARGS
    from tokokita_airflow.runtime import shared_settings

    settings = shared_settings()
    with DAG(
        dag_id=SWEEP_DAG_ID,
        description="Runs again the partitions whose inputs changed after their run",
        doc_md=doc_md,
        schedule=CronTriggerTimetable(settings.sweep_cron, timezone=settings.timezone),
        start_date=settings.catchup_start,
        catchup=False,  # each sweep looks at everything: a missed one needs no catching up
        is_paused_upon_creation=False,
        max_active_runs=1,
        tags=["tokokita", "sweep"],
        # a failed sweep (the state or Airflow's API did not answer) is tried again: finding
        # is read-only and a run it already triggered is skipped, never made twice
        default_args=dict(DEFAULT_ARGS),
    ) as dag:
        found = task(task_id=FIND_TASK)(changed_partitions)()
        TriggerDagRunOperator.partial(
            task_id=TRIGGER_TASK, logical_date=None, skip_when_already_exists=True,
        ).expand_kwargs(found)
    return dag
