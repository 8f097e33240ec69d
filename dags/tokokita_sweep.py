"""
# The sweep

Runs again the partitions whose inputs changed after their run: a done date whose raw file
changed since its success, for a pipeline with `on_raw_change: reprocess`; a week of the
weekly city report whose days' results changed since it was built (an identical reprocess
changes nothing), or whose run gave up before its days settled. It runs on `sweep_cron`
(hourly by default, in the shared `timezone`), without catch-up.

| task | what it does |
|---|---|
| `find_changed_partitions` | the partitions inside `lookback_days` whose inputs changed since |
| `trigger_runs` | one run of the pipeline's DAG per partition, which processes it again |

A run it makes is `sweep__<D>__<digest>` (the same change never makes a second run); its
partition key is D and its note says why.
"""

from __future__ import annotations

from tokokita_airflow.sweep import sweep_dag

dag = sweep_dag(doc_md=__doc__)
if dag is None:
    del dag
