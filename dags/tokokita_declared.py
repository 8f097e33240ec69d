"""
# An installed or declared pipeline

A pipeline an installed package registers under the entry point group
`tokokita_etl.pipelines`, or one the `declarations` setting names (`module:NAME`), beside the
package's own, run by the same runner: the run that fires on D+1 (its own `cron`, in the
shared `timezone`) processes D.

| task | what it does |
|---|---|
| `wait_for_raw_partition` | waits (reschedule mode) for its raw file of D; skips when it is not coming |
| `check_watermark` | skips D if done (unless cleared, forced, backfilled) or held; fails if blocked |
| one task per stage | its declaration's stages, in order; the last one records the success |

Trigger, Backfill, Clear and the `force` and `reset_attempts` params mean what they mean for
the orders DAG; its watermark, claims and manifests are its own (`state_dir/<name>/`), so
nothing done to one pipeline's dates touches another's. Its settings are the shared ones and
its own (`pipelines: {<name>: ...}` in the YAML file, `TOKOKITA_<NAME>__<SETTING>`).
"""

from __future__ import annotations

from tokokita_airflow.dag import declared_dags

globals().update(declared_dags(doc_md=__doc__))
