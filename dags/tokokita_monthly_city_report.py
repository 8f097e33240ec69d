"""
# TokoKita monthly city report

One run per calendar month (in the pipeline's zone), keyed by its **first day**
(`YYYY-MM-01`): the run that fires on **the 2nd at 05:00** (the default `cron`) builds the
month before, once each of its orders dates is settled (done, or missing after its wait
window). It sums the dates' `summary_harian` rows per kota into `summary_bulanan` and
publishes `summary_bulanan_<YYYY-MM-01>.csv`. Its watermark records the daily checksums each
month was built from, so a month is built again only when one of them changes.

| task | what it does |
|---|---|
| `wait_for_inputs` | waits for the month's dates to settle (reschedule mode); skips if they do not |
| `check_watermark` | skips a built month whose inputs are unchanged, or held; fails if blocked |
| `collect` ... `publish_gold` | one stage each, as `tokokita-etl run --pipeline ...` runs them |

**Trigger** with a month's first day in *Partition Key*; **Backfill** over a date range makes
one run per whole month in it; **Clear** builds the month again. A month whose days change
after it was built (a corrected raw file reprocessed with other results), or whose run gave
up before its days settled, is built by the `tokokita_sweep` DAG, its run's note naming the
reason.
"""

from __future__ import annotations

from tokokita_airflow.dag import pipeline_dag
from tokokita_etl.monthly.pipeline import MONTHLY_CITY_REPORT

dag = pipeline_dag(MONTHLY_CITY_REPORT, doc_md=__doc__)
