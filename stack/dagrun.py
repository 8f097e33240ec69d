"""Run the DAG once per partition date through Airflow's `dag.test()` (used by `make demo`).

`python -m stack.dagrun RESULT.json DATE [DATE ...]`, with the service environment already
set (stack.demo starts it so): each date is a manual run without a logical date and with the
`partition_date` param, exactly as a REST trigger `{"logical_date": null, "conf": {...}}`.
Airflow executes the tasks (sensor, gate, stages) in this process; the metadata database
records the runs, so `make up` shows them in the UI.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

DAG_ID = "tokokita_orders_daily"


def main(argv: list[str]) -> int:
    """Run the dates; write one result per date to the JSON file."""
    result_path, dates = Path(argv[0]), argv[1:]
    from airflow.configuration import conf
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(conf.get("core", "dags_folder"), include_examples=False)
    if bag.import_errors:
        print(json.dumps(bag.import_errors, indent=2), file=sys.stderr)
        return 2
    dag = bag.dags[DAG_ID]
    for task in dag.tasks:
        # dag.test() runs retries in-line: do not sleep the DAG's 5-minute retry_delay here
        task.retry_delay = timedelta(0)
    results = []
    for day in dates:
        run = dag.test(logical_date=None, run_conf={"partition_date": day})
        states = {ti.task_id: str(getattr(ti.state, "value", ti.state))
                  for ti in run.get_task_instances()}
        results.append({"date": day, "run_id": run.run_id,
                        "state": str(getattr(run.state, "value", run.state)), "tasks": states})
        result_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
