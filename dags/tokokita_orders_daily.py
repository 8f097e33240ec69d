"""
# TokoKita orders, daily

Processes one raw partition `pesanan_D.csv` per run: the run that fires at **D+1 02:30
Asia/Jakarta** processes **D** (yesterday). Catch-up is on; the watermark gate makes
Airflow's catch-ups, retries, backfills, triggers and clears process exactly the dates the
pipeline's `due_runs` would.

| task | what it does |
|---|---|
| `wait_for_raw_partition` | waits (reschedule mode) for the file of D; skips when it is not coming |
| `check_watermark` | skips D if done, fails if blocked at max attempts, claims D |
| `extract` ... `publish_gold` | one pipeline stage each, same functions as `tokokita-etl run` |

**Trigger with config** to process a specific date (`partition_date`), to reprocess a date
that succeeded (`force`), or to unblock a date that reached max attempts (`reset_attempts`).
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Asset, CronTriggerTimetable, Param, chain

from tokokita_airflow.operators import EtlStageOperator, WatermarkGateOperator
from tokokita_airflow.sensors import RawPartitionSensor
from tokokita_etl.config import schedule_from_env

CRON, TIMEZONE = schedule_from_env()
GOLD_ASSET = Asset(name="tokokita_summary_harian", uri="tokokita://gold/summary_harian",
                   group="tokokita")

with DAG(
    dag_id="tokokita_orders_daily",
    description="TokoKita nightly orders ETL: raw CSV -> fact/summary -> gold CSV",
    doc_md=__doc__,
    # the logical date is the fire time, so D = local date of the logical date - 1 day
    schedule=CronTriggerTimetable(CRON, timezone=TIMEZONE),
    start_date=pendulum.parse(os.environ.get("TOKOKITA_START_DATE", "2026-11-01"), tz=TIMEZONE),
    end_date=(pendulum.parse(os.environ["TOKOKITA_END_DATE"], tz=TIMEZONE)
              if os.environ.get("TOKOKITA_END_DATE") else None),
    catchup=True,
    # a backfill of a paused DAG never starts: the DAG is active from its first parse
    is_paused_upon_creation=False,
    # dates run in parallel during a catch-up; loads serialise on the warehouse anyway and
    # three keeps a month of catch-up from starving the pool on a small machine
    max_active_runs=3,
    max_active_tasks=8,
    tags=["tokokita", "etl", "orders"],
    default_args={
        "owner": "tokokita-data",
        "retries": 2,
        "retry_delay": timedelta(minutes=5),
    },
    params={
        "force": Param(False, type="boolean", title="Force",
                       description="Reprocess the date even if it already succeeded"),
        "reset_attempts": Param(False, type="boolean", title="Reset attempts",
                                description="Unblock a date that reached max attempts "
                                            "(recorded in the watermark)"),
        "partition_date": Param(None, type=["null", "string"], format="date",
                                title="Partition date",
                                description="YYYY-MM-DD to process; empty: the day before "
                                            "the run's date in Asia/Jakarta"),
    },
) as dag:
    wait = RawPartitionSensor(task_id="wait_for_raw_partition")
    gate = WatermarkGateOperator(task_id="check_watermark")
    stages = [
        EtlStageOperator(task_id=stage, stage=stage,
                         outlets=[GOLD_ASSET] if stage == "publish_gold" else [])
        for stage in ("extract", "transform", "load", "validate", "publish_gold")
    ]
    chain(wait, gate, *stages)
