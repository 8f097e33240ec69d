"""Run the DAG once with `dag.test()` in this process, with whatever OpenLineage settings the
environment holds (the provider reads them when it is imported); print the run as JSON.

`python -m tests.plugins.lineage_run YYYY-MM-DD` (a manual run of that partition date); the
parent process has migrated the metadata database.
"""

from __future__ import annotations

import json
import sys
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from tests.airflow_support import REPO, allow_deadline_alerts_in_dag_test


def main(day: str) -> None:
    import pytest
    from airflow.dag_processing.dagbag import DagBag

    allow_deadline_alerts_in_dag_test(pytest.MonkeyPatch())
    bag = DagBag(str(REPO / "dags"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["tokokita_orders_daily"]
    # a manual run without a key processes the day before its logical date in Jakarta
    fire = datetime.combine(date.fromisoformat(day) + timedelta(days=1), time(2, 30),
                            ZoneInfo("Asia/Jakarta"))
    dr = dag.test(logical_date=fire)
    states = {ti.task_id: ti.state for ti in dr.get_task_instances()}
    print(json.dumps({"run_id": dr.run_id, "state": dr.state, "states": states}))


if __name__ == "__main__":
    main(sys.argv[1])
