"""Run the DAG once per partition date through Airflow's `dag.test()` (used by `make demo`).

`python -m stack.dagrun RESULT.json DATE [DATE ...]`, with the service environment already
set (stack.demo starts it so): each date D is a manual run with the `partition_date` param,
whose logical date is D's scheduled fire time (D+1 02:30 Asia/Jakarta by default), so the
UI shows it in the grid where the scheduled run of D would be. (Not a null logical date:
`dag.test()` first deletes every run of the DAG with the same logical date, and with None that
is every manual run, including ones triggered from the UI.) Airflow executes the tasks
(sensor, gate, stages) in this process; the metadata database records the runs, so `make up`
shows them. Running it again for D replaces that demo run (the gate then skips D: done).
"""

from __future__ import annotations

import json
import sys
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

DAG_ID = "tokokita_orders_daily"


def fire_time(day: date) -> datetime:
    """The scheduled fire time of partition `day`: the DAG's first cron tick on D+1."""
    from croniter import croniter

    from tokokita_etl.config import schedule_from_env

    cron, tz = schedule_from_env()
    nxt = day + timedelta(days=1)
    start = datetime(nxt.year, nxt.month, nxt.day, tzinfo=ZoneInfo(tz))
    return croniter(cron, start - timedelta(seconds=1)).get_next(datetime)


def main(argv: list[str]) -> int:
    """Run the dates; write one result per date to the JSON file."""
    result_path, dates = Path(argv[0]), argv[1:]
    from airflow.configuration import conf
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(conf.get("core", "dags_folder"))
    if bag.import_errors:
        print(json.dumps(bag.import_errors, indent=2), file=sys.stderr)
        return 2
    dag = bag.dags[DAG_ID]
    for task in dag.tasks:
        # dag.test() runs retries in-line: do not sleep the DAG's 5-minute retry_delay here
        task.retry_delay = timedelta(0)
    results = []
    for day in dates:
        run = dag.test(logical_date=fire_time(date.fromisoformat(day)),
                       run_conf={"partition_date": day})
        states = {ti.task_id: str(getattr(ti.state, "value", ti.state))
                  for ti in run.get_task_instances()}
        results.append({"date": day, "run_id": run.run_id,
                        "state": str(getattr(run.state, "value", run.state)), "tasks": states})
        result_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
