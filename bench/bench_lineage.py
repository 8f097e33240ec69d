"""What lineage costs a run: one date through the DAG (`dag.test()`, seven tasks, real task
execution on SQLite), in a fresh interpreter per run, three ways, alternated:

- ``absent``: the OpenLineage provider's plugin and listener cannot be imported (as if it
  were not installed; its metadata stays discoverable);
- ``off``: the provider installed with no transport, the default (lineage off);
- ``on``: the provider with its file transport, every stage reporting its datasets.

The figure is the ratio of the medians off / absent (and on / absent) of the seven tasks'
summed durations (`tasks_s`: what the tasks cost, without `dag.test()`'s own waits between
them); the run's wall time inside its interpreter, from parsing the DAG to the end of the run
(`seconds`), is reported too, but `dag.test()`'s scheduling loop makes it jump by seconds.

    python -m bench.bench_lineage [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DAY = "2026-11-02"
MODES = ("absent", "off", "on")


def _child(mode: str) -> None:
    """One run in this interpreter; prints {"seconds", "state"}."""
    if mode == "absent":
        import importlib.abc

        class NoOpenLineage(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                # the provider's metadata stays discoverable; its plugin, listener and
                # configuration cannot be imported
                if name.startswith("airflow.providers.openlineage.") and \
                        name != "airflow.providers.openlineage.get_provider_info":
                    raise ModuleNotFoundError(f"No module named {name!r} (benchmark)")
                return None

        sys.meta_path.insert(0, NoOpenLineage())
    sys.path[:0] = [str(REPO / "plugins"), str(REPO / "dags")]
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.deadline_alert import DeadlineAlert

    from devtools.dag_test import deadline_alert_lookup_for_dag_test
    from tokokita_etl.orders.pipeline import ORDERS

    # dag.test() of a DAG with a DeadlineAlert in Airflow 3.3.2 (apache/airflow#73428)
    DeadlineAlert.get_by_id = deadline_alert_lookup_for_dag_test()
    started = time.perf_counter()
    dag = DagBag(str(REPO / "dags")).dags[ORDERS.dag_id]
    dr = dag.test(run_conf={"partition_date": DAY})
    seconds = time.perf_counter() - started
    tasks = sum(ti.duration or 0.0 for ti in dr.get_task_instances())
    print(json.dumps({"seconds": seconds, "tasks_s": tasks, "state": str(dr.state)}))


def _project(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    (root / "data" / "raw").mkdir(parents=True)
    shutil.copytree(REPO / "config", root / "config")
    for path in (REPO / "data" / "raw").glob("pesanan_*.csv"):
        shutil.copy(path, root / "data" / "raw" / path.name)


def bench_lineage(repeat: int = 3) -> dict:
    """Median seconds per mode and the ratios to `absent`."""
    work = Path(tempfile.mkdtemp(prefix="tokokita-bench-lineage-"))
    home = work / "airflow"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENLINEAGE", "AIRFLOW__OPENLINEAGE", "TOKOKITA_"))}
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
                "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
                "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR",
                "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "include")])})
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"],
                   check=True, capture_output=True, env=env)
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    tasks: dict[str, list[float]] = {mode: [] for mode in MODES}
    events = 0
    try:
        for _ in range(repeat):
            for mode in MODES:
                project = work / "project"
                _project(project)
                run_env = {**env, "TOKOKITA_HOME": str(project)}
                log = work / "events.jsonl"
                if mode == "on":
                    log.unlink(missing_ok=True)
                    run_env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
                        {"type": "file", "log_file_path": str(log), "append": True})
                done = subprocess.run([sys.executable, "-m", "bench.bench_lineage", "--child",
                                       mode], cwd=REPO, env=run_env, capture_output=True,
                                      text=True, check=False)
                if done.returncode != 0:
                    raise RuntimeError(f"{mode} run failed: {done.stderr[-2000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                if result["state"] != "success":
                    raise RuntimeError(f"{mode} run ended {result['state']}")
                times[mode].append(result["seconds"])
                tasks[mode].append(result["tasks_s"])
                if mode == "on":
                    events = len(log.read_text().splitlines())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {mode: statistics.median(values) for mode, values in times.items()}
    task_medians = {mode: statistics.median(values) for mode, values in tasks.items()}
    return {"repeat": repeat, "seconds": times, "median_s": medians, "tasks_s": tasks,
            "tasks_median_s": task_medians,
            "tasks_off_vs_absent": task_medians["off"] / task_medians["absent"],
            "tasks_on_vs_absent": task_medians["on"] / task_medians["absent"],
            "off_vs_absent": medians["off"] / medians["absent"],
            "on_vs_absent": medians["on"] / medians["absent"], "events_on": events,
            "load_average": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_lineage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    print(json.dumps(bench_lineage(args.repeat), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
