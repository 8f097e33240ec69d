"""
# TokoKita weekly city report

One run per ISO week (Monday to Sunday in the pipeline's zone), keyed by its **Monday**: the
run that fires on **Monday 04:00** (the default `cron`) builds the week before, once each of
its seven orders dates is settled (done, or missing after its wait window). It sums the
dates' `summary_harian` rows per kota into `summary_mingguan` and publishes
`summary_mingguan_<Monday>.csv`. Its watermark records the daily checksums each week was
built from, so a week is built again only when one of them changes.

| task | what it does |
|---|---|
| `wait_for_inputs` | waits for the seven dates to settle (reschedule mode); skips if they do not |
| `check_watermark` | skips a built week whose inputs are unchanged, or held; fails if blocked |
| `collect` ... `publish_gold` | one stage each, as `tokokita-etl run --pipeline ...` runs them |

`wait_for_inputs` names the dates it waits for at each poke and waits at most
`wait_window_hours` from its first poke.

**Trigger** with a Monday in *Partition Key*; **Backfill** over a date range makes one run
per Monday in it; **Clear** builds the week again. A week whose days change after it was
built (a corrected raw file reprocessed with other results), or whose run gave up before its
days settled, is built by the `tokokita_sweep` DAG, its run's note naming the reason.
"""

from __future__ import annotations

from tokokita_airflow.dag import pipeline_dag
from tokokita_etl.weekly.pipeline import WEEKLY_CITY_REPORT

dag = pipeline_dag(WEEKLY_CITY_REPORT, doc_md=__doc__)
