"""
# TokoKita orders, daily

Processes one raw partition `pesanan_D.csv` per run: the run that fires at **D+1 02:30**
(the default `cron`, in the pipeline's time zone `timezone`) processes **D** (yesterday).
Every run carries D as its **Partition Key** from its creation (Airflow's
`CronPartitionTimetable`). Catch-up is on: the scheduled runs and the catch-up process exactly
the dates the pipeline's `due_runs` would at the same clock; a backfill, a trigger with a
partition key and a clear process exactly the dates they name, a done date included
(reprocessed with identical results). The watermark gate skips done dates otherwise, blocks a
date at `max_attempts` and lets one run hold a date at a time.

| task | what it does |
|---|---|
| `wait_for_raw_partition` | waits (reschedule mode) for the file of D; skips when it is not coming |
| `check_watermark` | skips D if done (unless cleared, forced, backfilled) or held; fails if blocked |
| `extract` ... `publish_gold` | one pipeline stage each, same functions as `tokokita-etl run` |

**Trigger** with the date in *Partition Key* (`YYYY-MM-DD`; empty: yesterday in the pipeline's
zone), `force` to reprocess a date that succeeded, `reset_attempts` to unblock a date that
reached max attempts. **Backfill** over partition dates: the Date Range D1..D2 (whole days in
the pipeline's zone, both included) makes one run per date, its Partition Key that date;
Missing Runs, Missing and Errored Runs or All Runs choose which dates get one, and each
reprocesses its date as a clear does. **Clear** re-runs: clearing a stage (with downstream),
the whole run, or every run of a date (clear by partition) reprocesses it, as `force` does.
See the operations guide for every gesture.

**Deadline**: a scheduled run must have succeeded by `deadline_local_time` (in the pipeline's
zone) on the fire date, else it alerts (logged by the triggerer, POSTed to
`deadline_webhook_url`, sent to the configured `notifiers`). Only scheduled runs created
before their deadline get one: a catch-up of past nights, a backfill and a manual run have
no deadline.

The schedule, zone, catch-up window, wait window and deadline are the pipeline's settings
(config/pipeline.yaml and the TOKOKITA_* environment, read here when the file is parsed).
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Asset, AsyncCallback, DeadlineAlert, Param, chain

from tokokita_airflow.deadlines import ScheduledRunDeadline
from tokokita_airflow.notifiers import deadline_alert
from tokokita_airflow.operators import EtlStageOperator, WatermarkGateOperator
from tokokita_airflow.runtime import configured_settings
from tokokita_airflow.sensors import RawPartitionSensor
from tokokita_airflow.timetable import DailyPartitionTimetable
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.runner import notify

SETTINGS = configured_settings()
# a scheduled run created before its deadline (deadline_local_time on its fire date) gets it;
# a catch-up run created after it, a backfill or a manual run gets none (notify.run_deadline).
# The reference is the midnight before the deadline, the interval the local time after it:
# Airflow's UI says "Must complete within 6 hours of midnight <zone> (succeeded by 06:00 ...)"
DEADLINE = DeadlineAlert(
    reference=ScheduledRunDeadline(deadline_local_time=SETTINGS.deadline_local_time,
                                   tz=SETTINGS.timezone),
    interval=notify.deadline_offset(SETTINGS.deadline_time),
    # logged, POSTed to deadline_webhook_url and sent to the `notifiers` (imported when sent)
    callback=AsyncCallback(deadline_alert, kwargs={
        "dag_id": ORDERS.dag_id, "webhook_url": SETTINGS.deadline_webhook_url,
        "tz": SETTINGS.timezone, "deadline_local_time": SETTINGS.deadline_local_time,
        "notifiers": SETTINGS.notifiers, "pipeline": SETTINGS.pipeline}),
    name=notify.deadline_wording(SETTINGS.cron, SETTINGS.timezone, SETTINGS.catchup_start,
                                 SETTINGS.deadline_time),
)
GOLD_ASSET = Asset(name="tokokita_summary_harian", uri="tokokita://gold/summary_harian",
                   group="tokokita")

with DAG(
    dag_id=ORDERS.dag_id,
    description=ORDERS.description,
    doc_md=__doc__,
    # Airflow's CronPartitionTimetable: each run carries D as its partition key from its
    # creation; the catch-up's end is the timetable's, not the DAG's: a manual run after it
    # has tasks
    schedule=DailyPartitionTimetable(SETTINGS.cron, timezone=SETTINGS.timezone,
                                     last_fire=SETTINGS.catchup_end),
    start_date=SETTINGS.catchup_start,
    catchup=True,
    # a backfill of a paused DAG never starts: the DAG is active from its first parse
    is_paused_upon_creation=False,
    # scheduled runs created before their deadline only; the callback runs on the triggerer
    deadline=DEADLINE,
    # dates run in parallel during a catch-up; loads serialise on the warehouse anyway and
    # three keeps a month of catch-up from starving the pool on a small machine
    max_active_runs=3,
    max_active_tasks=8,
    tags=list(ORDERS.tags),
    default_args={
        "owner": "tokokita-data",
        # only transient errors are retried (WatermarkRetryPolicy): 1, 2, 4 ... minutes
        "retries": 2,
        "retry_delay": timedelta(minutes=1),
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(minutes=15),
    },
    params={
        "force": Param(False, type=["boolean", "null"], title="Force",
                       description="Reprocess the date even if it already succeeded"),
        "reset_attempts": Param(False, type=["boolean", "null"], title="Reset attempts",
                                description="Unblock a date that reached max attempts "
                                            "(recorded in the watermark)"),
    },
) as dag:
    wait = RawPartitionSensor(task_id="wait_for_raw_partition", wait_window=SETTINGS.wait_window)
    gate = WatermarkGateOperator(task_id="check_watermark")
    stages = [
        # the last stage records the success and publishes the gold file
        EtlStageOperator(task_id=stage, stage=stage,
                         outlets=[GOLD_ASSET] if stage == ORDERS.stage_names[-1] else [])
        for stage in ORDERS.stage_names
    ]
    chain(wait, gate, *stages)
