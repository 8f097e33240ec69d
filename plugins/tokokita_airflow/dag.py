"""`pipeline_dag`: the DAG of a declared pipeline, built from its declaration and settings.

Every pipeline's DAG has the same shape: `wait_for_raw_partition` (the raw file of D; for a
pipeline built from another's results, `wait_for_inputs`: its upstream dates settled),
`check_watermark` (the gate), then one task per stage, in the declaration's order; the last
stage records the success and updates the pipeline's asset. Its schedule, zone, catch-up
window, wait window and deadline are the pipeline's settings (`runtime.configured_settings`),
read when the DAG file is parsed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import DAG

    from tokokita_etl.runner.declaration import Pipeline
    from tokokita_etl.settings.model import Settings

#: the task that waits for the raw file, and the gate
WAIT_TASK, GATE_TASK = "wait_for_raw_partition", "check_watermark"
#: the task that waits for the upstream dates of a pipeline built from another's results
WAIT_INPUTS_TASK = "wait_for_inputs"
#: what every pipeline's tasks retry with (only transient errors: `WatermarkRetryPolicy`):
#: 1, 2, 4 ... minutes
DEFAULT_ARGS: dict[str, Any] = {
    "owner": "tokokita-data",
    "retries": 2,
    "retry_delay": timedelta(minutes=1),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=15),
}

#: what the trigger form and the Backfill dialog say under each toggle
BACKFILL_NOTE = ("In the Backfill dialog it is sent only when \"Override parameters on "
                 "existing runs\" is ticked")
FORCE_DESCRIPTION = ("Reprocess the date even if it already succeeded. A backfill reprocesses "
                     "its dates without it")
RESET_DESCRIPTION = ("Unblock a date that reached max attempts (recorded in the watermark). "
                     f"{BACKFILL_NOTE}; without it a backfill of a blocked date fails")


def pipeline_dag(pipeline: Pipeline, *, doc_md: str | None = None,
                 settings: Settings | None = None) -> DAG:
    """The DAG of `pipeline` (its `dag_id`), documented by `doc_md` (default: its description),
    scheduled by `settings` (default: its configured settings)."""
    from airflow.sdk import DAG, Asset, AsyncCallback, DeadlineAlert, Param, chain

    from tokokita_airflow.deadlines import ScheduledRunDeadline
    from tokokita_airflow.notifiers import deadline_alert
    from tokokita_airflow.operators import EtlStageOperator, WatermarkGateOperator
    from tokokita_airflow.runtime import configured_settings
    from tokokita_airflow.sensors import RawPartitionSensor, UpstreamSettledSensor
    from tokokita_airflow.timetable import DailyPartitionTimetable
    from tokokita_etl.runner import notify

    settings = configured_settings(pipeline) if settings is None else settings
    # a scheduled run created before its deadline (deadline_local_time on its fire date) gets
    # it; a catch-up run created after it, a backfill or a manual run gets none
    # (notify.run_deadline). The reference is the midnight before the deadline, the interval
    # the local time after it: Airflow's UI says "Must complete within 6 hours of midnight
    # <zone> (succeeded by 06:00 ...)"
    deadline = DeadlineAlert(
        reference=ScheduledRunDeadline(deadline_local_time=settings.deadline_local_time,
                                       tz=settings.timezone),
        interval=notify.deadline_offset(settings.deadline_time),
        # logged, POSTed to deadline_webhook_url and sent to the `notifiers` (imported when
        # sent)
        callback=AsyncCallback(deadline_alert, kwargs={
            "dag_id": pipeline.dag_id, "webhook_url": settings.deadline_webhook_url,
            "tz": settings.timezone, "deadline_local_time": settings.deadline_local_time,
            "notifiers": settings.notifiers, "pipeline": settings.pipeline}),
        name=notify.deadline_wording(settings.cron, settings.timezone, settings.catchup_start,
                                     settings.deadline_time),
    )
    outlets = [Asset(name=pipeline.asset[0], uri=pipeline.asset[1], group="tokokita")] \
        if pipeline.asset else []
    with DAG(
        dag_id=pipeline.dag_id,
        description=pipeline.description,
        doc_md=doc_md or pipeline.description,
        # Airflow's CronPartitionTimetable: each run carries D as its partition key from its
        # creation; the catch-up's end is the timetable's, not the DAG's: a manual run after
        # it has tasks
        schedule=DailyPartitionTimetable(settings.cron, timezone=settings.timezone,
                                         last_fire=settings.catchup_end,
                                         grain=pipeline.grain.name),
        start_date=settings.catchup_start,
        catchup=True,
        # a backfill of a paused DAG never starts: the DAG is active from its first parse
        is_paused_upon_creation=False,
        # scheduled runs created before their deadline only; the callback runs on the
        # triggerer
        deadline=deadline,
        # dates run in parallel during a catch-up; loads serialise on the warehouse anyway
        # and three keeps a month of catch-up from starving the pool on a small machine
        max_active_runs=3,
        max_active_tasks=8,
        tags=list(pipeline.tags),
        default_args=dict(DEFAULT_ARGS),
        # Airflow 3.3's Backfill dialog shows these toggles but sends them only with its
        # "Override parameters on existing runs" box ticked: each description says so
        params={
            "force": Param(False, type=["boolean", "null"], title="Force",
                           description=FORCE_DESCRIPTION),
            "reset_attempts": Param(False, type=["boolean", "null"], title="Reset attempts",
                                    description=RESET_DESCRIPTION),
        },
    ) as dag:
        if pipeline.upstream is not None:
            wait = UpstreamSettledSensor(task_id=WAIT_INPUTS_TASK, pipeline=pipeline,
                                         wait_window=settings.wait_window)
        else:
            wait = RawPartitionSensor(task_id=WAIT_TASK, pipeline=pipeline,
                                      wait_window=settings.wait_window)
        gate = WatermarkGateOperator(task_id=GATE_TASK, pipeline=pipeline)
        last = pipeline.stage_names[-1]
        stages = [
            # the last stage records the success and updates the pipeline's asset
            EtlStageOperator(task_id=stage, pipeline=pipeline, stage=stage,
                             outlets=outlets if stage == last else [])
            for stage in pipeline.stage_names
        ]
        chain(wait, gate, *stages)
    return dag


def declared_dags(*, doc_md: str | None = None) -> dict[str, DAG]:
    """The DAG of every pipeline an installed package registers or the `declarations` setting
    names, by DAG id."""
    from tokokita_airflow.runtime import shared_settings
    from tokokita_etl.pipelines import declared, installed

    return {pipeline.dag_id: pipeline_dag(
                pipeline, doc_md=f"# {pipeline.name}\n\n{pipeline.description}\n\n{doc_md or ''}")
            for pipeline in (*installed(), *declared(shared_settings().declarations))}
