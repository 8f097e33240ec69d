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

from tokokita_airflow.dag import pipeline_dag
from tokokita_etl.orders.pipeline import ORDERS

dag = pipeline_dag(ORDERS, doc_md=__doc__)
