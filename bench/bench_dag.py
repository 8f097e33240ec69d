"""DAG file parse time against an empty DAG, measured two ways.

Warm: the files are parsed by Airflow's own ``DagBag`` from their own temporary folder, in
alternation, after a warm-up parse of each (so Airflow, the plugin and the pipeline's modules
are imported once and cached, as in a long-running DAG processor). Fresh: each file is loaded
by a new interpreter (``python FILE``, Airflow's "DAG loader test"), so every file pays the same
interpreter start and Airflow import and the project's file its own imports. The ratio of the
medians is the figure; absolute milliseconds depend on the machine.

    python -m bench --dag-parse
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tokokita_etl.settings.model import default

REPO = Path(__file__).resolve().parents[1]
DAG_FILE = REPO / "dags" / "tokokita_orders_daily.py"
#: the yardsticks' zone: the pipeline's default time zone
PIPELINE_ZONE = default("timezone")
EMPTY_DAG = '''"""An empty DAG: the yardstick for parse time."""
from __future__ import annotations

import pendulum
from airflow.sdk import DAG

with DAG(dag_id="empty_yardstick", schedule=None,
         start_date=pendulum.datetime(2026, 11, 1, tz=@ZONE@), catchup=False):
    pass
'''.replace("@ZONE@", repr(PIPELINE_ZONE))

# the same shape built from Airflow's own parts: 7 EmptyOperators, 3 Params, default_args,
# a cron timetable; what any DAG like this one costs Airflow to parse, without project code
SAME_SHAPE_DAG = '''"""Same shape, no project code."""
from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param, chain
from airflow.timetables.trigger import CronTriggerTimetable

with DAG(dag_id="same_shape_yardstick",
         schedule=CronTriggerTimetable("30 2 * * *", timezone=@ZONE@),
         start_date=pendulum.datetime(2026, 11, 1, tz=@ZONE@), catchup=True,
         max_active_runs=3, tags=["yardstick"],
         default_args={"owner": "x", "retries": 2, "retry_delay": timedelta(minutes=5)},
         params={"force": Param(False, type="boolean"),
                 "reset_attempts": Param(False, type="boolean"),
                 "partition_date": Param(None, type=["null", "string"])}):
    chain(*[EmptyOperator(task_id=f"t{i}") for i in range(7)])
'''.replace("@ZONE@", repr(PIPELINE_ZONE))


def _airflow_env(home: Path) -> None:
    os.environ.setdefault("AIRFLOW_HOME", str(home))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
    os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{home}/airflow.db")
    os.environ.setdefault("AIRFLOW__CORE__PLUGINS_FOLDER", str(REPO / "plugins"))
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "ERROR")
    for path in (REPO / "plugins", REPO / "include"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))


def bench_dag_load_fresh(folders: dict[str, Path], home: Path, repeat: int = 12) -> dict:
    """Median wall time of loading each DAG file in a new interpreter, alternating."""
    env = {**os.environ, "AIRFLOW_HOME": str(home),
           "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), str(REPO / "include")])}
    files = {name: next(folder.glob("*.py")) for name, folder in folders.items()}
    loader = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='dag_file')"

    def load(name: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", loader, str(files[name])], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        return time.perf_counter() - start

    for name in files:  # warm-up: the OS page cache, compiled bytecode
        load(name)
    times: dict[str, list[float]] = {name: [] for name in files}
    for _ in range(repeat):
        for name in files:
            times[name].append(load(name))
    medians = {name: statistics.median(t) for name, t in times.items()}
    return {
        "repeat": repeat,
        **{f"{name}_ms": round(m * 1000, 1) for name, m in medians.items()},
        "ratio": round(medians["project"] / medians["empty"], 3),
        "ratio_to_same_shape": round(medians["project"] / medians["same_shape"], 3),
    }


def bench_dag_parse(repeat: int = 60) -> dict:
    """Median DagBag parse time of the project's DAG file and of an empty DAG, and the ratio."""
    tmp = Path(tempfile.mkdtemp(prefix="tokokita-dagparse-"))
    try:
        _airflow_env(tmp)
        from airflow.dag_processing.dagbag import DagBag

        folders = {"project": tmp / "project", "empty": tmp / "empty",
                   "same_shape": tmp / "same_shape"}
        for folder in folders.values():
            folder.mkdir()
        shutil.copyfile(DAG_FILE, folders["project"] / DAG_FILE.name)
        (folders["empty"] / "empty_dag.py").write_text(EMPTY_DAG, encoding="utf-8")
        (folders["same_shape"] / "same_shape_dag.py").write_text(SAME_SHAPE_DAG, encoding="utf-8")

        def parse(name: str) -> float:
            start = time.perf_counter()
            bag = DagBag(str(folders[name]))
            elapsed = time.perf_counter() - start
            if bag.import_errors or len(bag.dags) != 1:
                raise RuntimeError(f"{name}: {bag.import_errors or bag.dags}")
            return elapsed

        for name in folders:  # warm-up: first imports happen here
            parse(name)
        times: dict[str, list[float]] = {name: [] for name in folders}
        for _ in range(repeat):
            for name in folders:
                times[name].append(parse(name))
        project = statistics.median(times["project"])
        empty = statistics.median(times["empty"])
        same = statistics.median(times["same_shape"])
        fresh = bench_dag_load_fresh(folders, tmp)
        return {
            "repeat": repeat,
            "fresh": fresh,
            "project_dag_ms": round(project * 1000, 2),
            "empty_dag_ms": round(empty * 1000, 2),
            "ratio": round(project / empty, 3),
            "same_shape_dag_ms": round(same * 1000, 2),
            "ratio_to_same_shape": round(project / same, 3),
            "project_min_ms": round(min(times["project"]) * 1000, 2),
            "empty_min_ms": round(min(times["empty"]) * 1000, 2),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    import json

    print(json.dumps(bench_dag_parse(), indent=2))
