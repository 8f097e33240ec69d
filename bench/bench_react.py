"""Time to react on a running local stack, and where a catch-up's per-task seconds go.

    python -m bench --react                           # the figures below, one JSON object
    python -m bench.bench_react --react [--reps 3]    # the same, with another repetition count
    python -m bench.bench_react --breakdown --days 10 \
        --variants airflow-defaults,without-preload,without-idle-sleep,compose

``--react`` starts one throw-away stack (``stack/ephemeral.py``, LocalExecutor) and measures

* **landing -> processing**: scheduled runs whose partition is missing wait in
  `wait_for_raw_partition`; each file is then written, and the seconds from the write until
  `check_watermark` and `extract` start (their task instances' start_date) are reported, for
  the sensor as the DAG has it (reschedule mode) and deferrable. The DAG builds the sensor with
  the defaults of `RawPartitionSensor` (mode reschedule, poke_interval 300 s, not deferrable);
  `deferrable` is an operator argument the DAG does not expose, so the deferrable side is a
  copy of the DAG file written into the throw-away stack's own dags folder (next to a link to
  the real file) with `deferrable=True`, another dag_id and three other dates; nothing in
  dags/ changes. Both DAGs wait for real: the stack's wait window
  (TOKOKITA_WAIT_WINDOW_HOURS) is widened so that the last few days' scheduled runs are all
  inside it; the waiting and the reaction are the same as for the day's own run.
  A file lands at an unknown moment of the poke interval, so the three files of each mode are
  written 1/6, 3/6 and 5/6 of an interval after that run's last check (observed through the
  REST API): the figures sample the interval evenly, and the part above the wait for the next
  check (the hand-off from the sensor to the gate) is reported on its own. The deferrable
  DAG is created paused and unpaused 45 s after the first reschedule-mode check, so that the
  two modes' runs do not reach the 2 cores at the same moment.
* **bad partition -> failure**: a partition missing required columns (header
  `order_id,kota`) is triggered through the REST API for its date (`partition_date` param);
  the seconds from the trigger to the run's `failed` state and to the failing task's end, and
  the tries of that task (no Airflow retry).

``--breakdown`` runs a catch-up of ``--days`` dates on one throw-away stack per variant (the
compose file's catch-up settings, or Airflow's defaults in their place, ``VARIANTS``), one after
the other, and splits each task instance's seconds from its timestamps (REST API) and its log:
scheduling delay (upstream end -> scheduled), queueing, executor pick-up (queued -> the
supervisor's start), process start (-> the task runner's first line), start message (-> the
task runner has its start message, which the supervisor sends after telling the api-server
the task runs, and the DAG bundle), DAG parse, execute, finish; with ``PYTHONPROFILEIMPORTTIME``
set for the scheduler (whose LocalExecutor workers fork the task processes; every variant
alike) the imports each task process still does. `first_sensor_end_to_last_run_end_s` is
the catch-up without the stack's start and its first task processes' cold start. It also
measures the imports in fresh interpreters and the same dates through the command line
(once, before the stacks).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import REPO
from tokokita_etl.orders.contract import partition_path

TASKS = ("wait_for_raw_partition", "check_watermark", "extract", "transform", "load",
         "validate", "publish_gold")
VARIANT_DAG_ID = "tokokita_orders_daily_deferrable"
BAD_PARTITION = b"order_id,kota\nTK-1,Bandung\n"
#: seconds between REST polls while waiting (the write times are exact; the observed check
#: times only place the writes in the poke interval)
POLL_S = 1.0

#: the compose file's settings for a catch-up (a forkserver that preloads Airflow, the plugins
#: and the pipeline's heavy modules; a 0.1 s idle sleep; a supervisor that notices its ended
#: task within 1 s), and the variants that take them away again, on the throw-away stack only
#: (extra_env); an empty value leaves Airflow's default (the platform's start method: fork)
VARIANTS: dict[str, dict[str, str]] = {
    "compose": {},
    "without-preload": {"AIRFLOW__SCHEDULER__MP_START_METHOD": "",
                        "AIRFLOW__SCHEDULER__MP_FORKSERVER_PRELOAD": ""},
    "without-idle-sleep": {"AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "1"},
    "without-heartbeat-interval": {"AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "5"},
}
VARIANTS["airflow-defaults"] = {**VARIANTS["without-preload"], **VARIANTS["without-idle-sleep"],
                                **VARIANTS["without-heartbeat-interval"]}


# -- helpers ------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """nproc, CPU model, memory and load average now."""
    from bench.report import machine as report_machine

    info = report_machine()
    info["nproc"] = len(os.sched_getaffinity(0))
    return info


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _secs(later: datetime | None, earlier: datetime | None) -> float | None:
    if later is None or earlier is None:
        return None
    return round((later - earlier).total_seconds(), 3)


def stats(values: list[float | None]) -> dict[str, Any]:
    """min, median, max (and n) of the values that are there."""
    have = [v for v in values if v is not None]
    if not have:
        return {"n": 0}
    return {"n": len(have), "min": round(min(have), 2), "median": round(statistics.median(have), 2),
            "max": round(max(have), 2)}


def task_instances(api, dag_id: str) -> list[dict[str, Any]]:
    """Every task instance of the DAG, across its runs (paged)."""
    found: list[dict[str, Any]] = []
    while True:
        page = api.get(f"/dags/{dag_id}/dagRuns/~/taskInstances", limit=100, offset=len(found))
        found.extend(page["task_instances"])
        if len(found) >= page["total_entries"] or not page["task_instances"]:
            return found


def deferrable_variant(*, start_date: str, end_date: str) -> str:
    """A DAG file of the orders pipeline with a deferrable sensor, its own dag_id and catch-up
    window, and paused at creation (the bench unpauses it)."""
    return f'''"""The orders DAG with a deferrable sensor (bench/bench_react.py)."""
from dataclasses import replace

from tokokita_airflow.dag import WAIT_TASK, pipeline_dag
from tokokita_airflow.runtime import configured_settings
from tokokita_etl.orders.pipeline import ORDERS

dag = pipeline_dag(replace(ORDERS, dag_id={VARIANT_DAG_ID!r}), doc_md=__doc__,
                   settings=configured_settings(ORDERS).replace(start_date={start_date!r},
                                                                end_date={end_date!r}))
dag.is_paused_upon_creation = True
dag.get_task(WAIT_TASK).deferrable = True
'''


def sensor_setup(stack, dag_file: Path) -> dict[str, Any]:
    """How a DAG file builds `wait_for_raw_partition` (parsed in a child process with the
    stack's environment)."""
    code = ("import json, runpy, sys; sys.path[:0] = [sys.argv[2], sys.argv[3]]; "
            "dag = runpy.run_path(sys.argv[1])['dag']; t = dag.get_task('wait_for_raw_partition'); "
            "print(json.dumps({'dag_id': dag.dag_id, 'operator': type(t).__name__, "
            "'mode': t.mode, 'poke_interval_s': t.poke_interval, 'deferrable': t.deferrable, "
            "'timeout_s': t.timeout, 'soft_fail': t.soft_fail, "
            "'wait_window_h': t.wait_window.total_seconds() / 3600}))")
    proc = subprocess.run([sys.executable, "-c", code, str(dag_file), str(REPO / "plugins"),
                           str(REPO / "include")], env=stack.service_env(), capture_output=True,
                          text=True, check=True, timeout=120)
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- time to react ------------------------------------------------------------------------


def react(reps: int = 3, rows: int = 2000, shift_s: float = 45.0) -> dict[str, Any]:
    """Landing -> processing (reschedule and deferrable sensor), bad partition -> failure."""
    from devtools.samples import generate_partition
    from stack.ephemeral import EphemeralStack, dag_settings, fire_time, last_fired_day

    started = time.monotonic()
    report: dict[str, Any] = {"machine": machine(), "reps": reps, "rows_per_partition": rows}
    now = datetime.now(UTC)
    today = now.astimezone(dag_settings().tz).date()
    last = last_fired_day(now)
    days = {"reschedule": [last - timedelta(days=reps - 1 - i) for i in range(reps)]}
    days["deferrable"] = [days["reschedule"][0] - timedelta(days=reps - i) for i in range(reps)]
    bad_days = [today - timedelta(days=20 + i) for i in range(reps)]
    oldest = days["deferrable"][0]
    window_h = (today - oldest).days * 24 + 48  # every run above is still inside its window
    with tempfile.TemporaryDirectory(prefix="tokokita-react-") as tmp:
        root = Path(tmp)
        dags = root / "dags"
        dags.mkdir()
        (dags / "tokokita_orders_daily.py").symlink_to(REPO / "dags" / "tokokita_orders_daily.py")
        variant = dags / f"{VARIANT_DAG_ID}.py"
        variant.write_text(deferrable_variant(
            start_date=(days["deferrable"][0] + timedelta(days=1)).isoformat(),
            end_date=fire_time(days["deferrable"][-1]).isoformat()), encoding="utf-8")
        stack = EphemeralStack(
            root, start_date=(days["reschedule"][0] + timedelta(days=1)).isoformat(),
            end_date=fire_time(days["reschedule"][-1]).isoformat(),
            tokokita_env={"TOKOKITA_LOOKBACK_DAYS": str((today - oldest).days + 2)})
        stack.target.mounts["/opt/airflow/dags"] = dags
        stack.target.extra_env["TOKOKITA_WAIT_WINDOW_HOURS"] = str(window_h)
        report["stack_settings"] = {"TOKOKITA_WAIT_WINDOW_HOURS": window_h,
                                    "TOKOKITA_LOOKBACK_DAYS": (today - oldest).days + 2}
        try:
            stack.prepare()
            report["sensor"] = {"as_the_dag_has_it": sensor_setup(stack, dags / "tokokita_orders_daily.py"),
                                "deferrable_variant": sensor_setup(stack, variant)}
            poke = float(report["sensor"]["as_the_dag_has_it"]["poke_interval_s"])
            offsets = [poke * (2 * i + 1) / (2 * reps) for i in range(reps)]
            report["write_offsets_s"] = [round(o, 1) for o in offsets]
            for day in [*days["reschedule"], *days["deferrable"]]:
                generate_partition(partition_path(root / "generated", day), day,
                                   rows, seed=5)
            for day in bad_days:
                stack.write_raw(day, BAD_PARTITION)
            stack.start()
            report["start_to_healthy_s"] = round(stack.timings["healthy_s"], 1)
            waits = _landings(stack, days, offsets, root, shift_s, timeout=2 * poke + 420)
            report.update(_landing_figures(stack, waits))
            report["bad_partition"] = _bad_partitions(stack, bad_days)
        finally:
            stack.close()
    report["wall_s"] = round(time.monotonic() - started, 1)
    return report


def _landings(stack, days: dict[str, list[date]], offsets: list[float], root: Path,
              shift_s: float, timeout: float) -> dict[str, dict[date, dict[str, Any]]]:
    """Wait for each run's sensor to be waiting, write its file at its offset after that
    check, until every run has finished."""
    from stack.ephemeral import DAG_ID, partition_day

    dag_of = {"reschedule": DAG_ID, "deferrable": VARIANT_DAG_ID}
    waiting_state = {"reschedule": "up_for_reschedule", "deferrable": "deferred"}
    waits = {mode: {day: {"offset_s": offsets[i]} for i, day in enumerate(days[mode])}
             for mode in days}
    run_ids: dict[str, dict[str, date]] = {mode: {} for mode in days}
    unpaused_at: float | None = None
    first_wait: float | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for mode, dag_id in dag_of.items():
            if mode == "deferrable" and unpaused_at is None:
                continue
            for run in stack.api.dag_runs(dag_id):
                if run["dag_run_id"] not in run_ids[mode] and run["run_type"] == "scheduled":
                    run_ids[mode][run["dag_run_id"]] = partition_day(run)
                day = run_ids[mode].get(run["dag_run_id"])
                if day in waits[mode]:
                    waits[mode][day]["run"] = run
            for ti in task_instances(stack.api, dag_id):
                day = run_ids[mode].get(ti["dag_run_id"])
                if ti["task_id"] != TASKS[0] or day not in waits[mode]:
                    continue
                entry = waits[mode][day]
                if ti["state"] == waiting_state[mode] and "waiting_seen" not in entry:
                    entry["waiting_seen"] = datetime.now(UTC)
                    entry["waiting_seen_mono"] = time.monotonic()
                    entry["check_end"] = _ts(ti["end_date"])  # the check's own end, if kept
                    first_wait = first_wait or time.monotonic()
        if unpaused_at is None and first_wait and time.monotonic() >= first_wait + shift_s:
            # the deferrable runs start a little later, so that the two modes' runs do not
            # reach the CPU at the same moment
            stack.api.set_paused(VARIANT_DAG_ID, False)
            unpaused_at = time.monotonic()
        for mode in waits:
            for day, entry in waits[mode].items():
                if ("written" not in entry and "waiting_seen_mono" in entry
                        and time.monotonic() >= entry["waiting_seen_mono"] + entry["offset_s"]):
                    data = partition_path(root / "generated", day).read_bytes()
                    stack.write_raw(day, data)
                    entry["written"] = datetime.now(UTC)
        done = all("written" in e and e.get("run", {}).get("state") in ("success", "failed")
                   for mode in waits for e in waits[mode].values())
        if done:
            return waits
        time.sleep(POLL_S)
    states = {mode: {str(day): entry.get("run", {}).get("state") for day, entry in w.items()}
              for mode, w in waits.items()}
    raise TimeoutError(f"landing runs not finished after {timeout:.0f}s: {states}")


def _landing_figures(stack, waits) -> dict[str, Any]:
    from stack.ephemeral import DAG_ID

    out: dict[str, Any] = {}
    for mode, dag_id in (("reschedule", DAG_ID), ("deferrable", VARIANT_DAG_ID)):
        rows = []
        for day, entry in sorted(waits[mode].items()):
            run = entry["run"]
            tis = stack.api.task_instances(dag_id, run["dag_run_id"])
            sensor, gate, extract = tis[TASKS[0]], tis["check_watermark"], tis["extract"]
            written = entry["written"]
            rows.append({
                "date": day.isoformat(), "run_state": run["state"],
                "states": {k: tis[k]["state"] for k in TASKS},
                "written_after_check_s": _secs(written, entry["waiting_seen"]),
                "written_after_check_end_s": _secs(written, entry.get("check_end")),
                "to_check_watermark_s": _secs(_ts(gate["start_date"]), written),
                "to_extract_s": _secs(_ts(extract["start_date"]), written),
                "sensor_done_s": _secs(_ts(sensor["end_date"]), written),
                "handoff_s": _secs(_ts(gate["start_date"]), _ts(sensor["end_date"])),
                "gate_s": _secs(_ts(extract["start_date"]), _ts(gate["start_date"])),
                "sensor_try_number": sensor["try_number"],
            })
        out[mode] = {
            "to_check_watermark_s": stats([r["to_check_watermark_s"] for r in rows]),
            "to_extract_s": stats([r["to_extract_s"] for r in rows]),
            "sensor_done_s": stats([r["sensor_done_s"] for r in rows]),
            "handoff_s": stats([r["handoff_s"] for r in rows]),
            "all_processed": all(r["states"]["publish_gold"] == "success" for r in rows),
            "runs": rows,
        }
    return out


def _bad_partitions(stack, days: list[date]) -> dict[str, Any]:
    """Trigger each bad date in turn and time its failure."""
    from stack.ephemeral import DAG_ID

    rows = []
    for day in days:
        triggered = datetime.now(UTC)
        run = stack.api.trigger(DAG_ID, {"partition_date": day.isoformat()})
        while run["state"] not in ("success", "failed"):
            time.sleep(0.2)
            run = stack.api.dag_run(DAG_ID, run["dag_run_id"])
        seen = datetime.now(UTC)
        tis = stack.api.task_instances(DAG_ID, run["dag_run_id"])
        failing = [t for t in TASKS if tis[t]["state"] == "failed"]
        task = failing[0] if failing else None
        tries = stack.api.tries(DAG_ID, run["dag_run_id"], task) if task else []
        entry = stack.watermark().get(day.isoformat(), {})
        rows.append({
            "date": day.isoformat(), "run_state": run["state"], "failed_task": task,
            "states": {k: tis[k]["state"] for k in TASKS},
            "to_run_failed_s": _secs(_ts(run["end_date"]), triggered),
            "to_failed_seen_s": _secs(seen, triggered),
            "to_task_start_s": _secs(_ts(tis[task]["start_date"]), triggered) if task else None,
            "to_task_end_s": _secs(_ts(tis[task]["end_date"]), triggered) if task else None,
            "task_tries": [t["state"] for t in tries],
            "try_number": tis[task]["try_number"] if task else None,
            "max_tries": tis[task]["max_tries"] if task else None,
            "watermark": {k: entry.get(k) for k in ("status", "attempt")},
            "error": (entry.get("error") or "")[-160:],
        })
    return {
        "to_run_failed_s": stats([r["to_run_failed_s"] for r in rows]),
        "to_task_end_s": stats([r["to_task_end_s"] for r in rows]),
        "failed_without_retry": all(len(r["task_tries"]) == 1 and r["try_number"] == 1
                                    for r in rows),
        "runs": rows,
    }


# -- where a catch-up's per-task seconds go -----------------------------------------------

_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)")
_MARKS = {"pre_execute": "::group::Pre Execute", "post_execute": "::group::Post Execute"}


def log_marks(text: str) -> dict[str, Any]:
    """Timestamps of the task runner's phases and the task process's imports in one log."""
    marks: dict[str, Any] = {}
    imports: dict[str, int] = {}
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        event = str(record.get("event", ""))
        stamp = _ts(record.get("timestamp"))
        match = _IMPORT_LINE.match(event)
        if match:
            if not match.group(3):  # a top-level import (its cumulative time)
                imports[match.group(4)] = imports.get(match.group(4), 0) + int(match.group(2))
            continue
        for key, text_ in _MARKS.items():
            if event == text_ and key not in marks:
                marks[key] = stamp
        if event.startswith("DAG bundles loaded") and "bundles_loaded" not in marks:
            marks["bundles_loaded"] = stamp
        if event == "::endgroup::" and "pre_execute" in marks and "execute" not in marks:
            marks["execute"] = stamp
    marks["imports_s"] = round(sum(imports.values()) / 1e6, 3)
    marks["imports"] = imports
    return marks


def _split(ti: dict[str, Any], ready: datetime | None, marks: dict[str, Any]) -> dict[str, Any]:
    start, end = _ts(ti["start_date"]), _ts(ti["end_date"])
    return {
        "schedule_s": _secs(_ts(ti["scheduled_when"]), ready),
        "queue_s": _secs(_ts(ti["queued_when"]), _ts(ti["scheduled_when"])),
        "pickup_s": _secs(start, _ts(ti["queued_when"])),
        "process_start_s": _secs(marks.get("pre_execute"), start),
        "start_message_s": _secs(marks.get("bundles_loaded"), marks.get("pre_execute")),
        "dag_parse_s": _secs(marks.get("execute"), marks.get("bundles_loaded")),
        "execute_s": _secs(marks.get("post_execute"), marks.get("execute")),
        "finish_s": _secs(end, marks.get("post_execute")),
        "duration_s": _secs(end, start),
        "imports_s": marks.get("imports_s"),
    }


PHASES = ("schedule_s", "queue_s", "pickup_s", "process_start_s", "start_message_s",
          "dag_parse_s", "execute_s", "finish_s", "duration_s", "imports_s")


def stack_breakdown(days: int, rows: int, variant: str, importtime: bool = True) -> dict[str, Any]:
    """One catch-up of `days` dates on a throw-away stack with the variant's settings."""
    from bench.catchup_stack import catchup
    from stack.ephemeral import DAG_ID

    load_start = os.getloadavg()
    profile = {"airflow-scheduler": {"PYTHONPROFILEIMPORTTIME": "1"}} if importtime else {}
    with catchup(days, rows, timeout=900, poll_s=1.0, extra_env=VARIANTS[variant],
                 service_env=profile) as done:
        stack, runs = done.stack, done.runs
        tis = task_instances(stack.api, DAG_ID)
        by_run: dict[str, dict[str, dict]] = {}
        for ti in tis:
            by_run.setdefault(ti["dag_run_id"], {})[ti["task_id"]] = ti
        per_task: dict[str, list[dict[str, Any]]] = {t: [] for t in TASKS}
        imports_by_module: dict[str, dict[str, list[float]]] = {t: {} for t in TASKS}
        run_walls, gaps, busy = [], [], []
        first_sensor_end = min(_ts(by_run[r["dag_run_id"]][TASKS[0]]["end_date"])
                               for r in runs)
        last_end = max(_ts(r["end_date"]) for r in runs)
        for run in runs:
            instances = by_run[run["dag_run_id"]]
            ready = _ts(run["start_date"])
            for task in TASKS:
                ti = instances[task]
                marks = log_marks(stack.task_log(run["dag_run_id"], task, ti["try_number"]))
                split = _split(ti, ready, marks)
                per_task[task].append(split)
                for module, micro in marks["imports"].items():
                    imports_by_module[task].setdefault(module, []).append(micro / 1e6)
                ready = _ts(ti["end_date"])
            run_walls.append(_secs(_ts(run["end_date"]), _ts(run["start_date"])))
            busy.append(sum(s["duration_s"] for s in
                            (per_task[t][-1] for t in TASKS) if s["duration_s"]))
            gaps.append(run_walls[-1] - busy[-1])
        result = {
            "variant": variant, "settings": VARIANTS[variant], "days": days,
            "rows_per_partition": rows, "load_average_at_start": load_start,
            "runs": len(runs), "failed_runs": sum(r["state"] == "failed" for r in runs),
            "processed": sum(by_run[r["dag_run_id"]]["publish_gold"]["state"] == "success"
                             for r in runs),
            **done.figures(),
            "per_date_after_healthy_s": round((done.total_s - done.start_to_healthy_s) / days, 2),
            # from the first sensor's end to the last run's end: the catch-up's own work,
            # without the stack's start and the first task processes' cold start
            "first_sensor_end_to_last_run_end_s": _secs(last_end, first_sensor_end),
            "run_wall_s": stats(run_walls),
            "run_task_seconds_s": stats(busy),
            "run_between_tasks_s": stats(gaps),
            "per_task_median_s": {
                task: {p: stats([s[p] for s in splits])["median"] if splits else None
                       for p in PHASES}
                for task, splits in per_task.items()},
            "per_task_max_s": {
                task: {p: stats([s[p] for s in splits]).get("max") for p in PHASES}
                for task, splits in per_task.items()},
            "phase_sum_per_run_s": {
                p: round(sum(s[p] or 0 for splits in per_task.values() for s in splits)
                         / len(runs), 2) for p in PHASES},
            "top_imports_median_s": {
                task: dict(sorted(((m, round(statistics.median(v), 3))
                                   for m, v in mods.items()),
                                  key=lambda kv: -kv[1])[:4])
                for task, mods in imports_by_module.items()},
        }
    return result


_IMPORT_PROBE = """
import json, runpy, sys, time
t = {}
def step(name, code):
    s = time.perf_counter(); exec(code, {"sys": sys}); t[name] = round(time.perf_counter() - s, 3)
step("airflow_task_sdk", "import airflow.sdk, airflow.sdk.execution_time.task_runner, "
     "airflow.sdk.execution_time.supervisor")
sys.path[:0] = [sys.argv[1] + "/include", sys.argv[1] + "/plugins"]
step("dag_file_and_project", "import runpy; runpy.run_path(sys.argv[1] + '/dags/tokokita_orders_daily.py')")
step("pyarrow", "import pyarrow, pyarrow.compute, pyarrow.parquet, pyarrow.csv, pyarrow.dataset")
step("duckdb", "import duckdb")
step("sqlalchemy_psycopg", "import sqlalchemy, sqlalchemy.dialects.postgresql, psycopg")
step("pipeline_modules", "import tokokita_etl.orders.extract, tokokita_etl.orders.transform, "
     "tokokita_etl.orders.load, tokokita_etl.orders.validate, tokokita_etl.warehouse.database, "
     "tokokita_etl.orders.gold")
print(json.dumps(t))
"""

_ALONE = {
    "pyarrow_alone": "import pyarrow, pyarrow.compute, pyarrow.parquet, pyarrow.csv, pyarrow.dataset",
    "duckdb_alone": "import duckdb",
    "sqlalchemy_psycopg_alone": "import sqlalchemy, sqlalchemy.dialects.postgresql, psycopg",
    "airflow_task_sdk_alone": "import airflow.sdk, airflow.sdk.execution_time.task_runner",
}


def fresh_imports(repeat: int = 3) -> dict[str, Any]:
    """Import seconds in fresh interpreters of the venv (medians of `repeat`): in the order a
    task process needs them after Airflow, and each group alone; plus the interpreter start."""
    with tempfile.TemporaryDirectory(prefix="tokokita-imports-") as home:
        return _fresh_imports(repeat, home)


def _fresh_imports(repeat: int, home: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "TOKOKITA"))}
    env["AIRFLOW_HOME"] = home
    ordered: dict[str, list[float]] = {}
    alone: dict[str, list[float]] = {}
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, str(REPO)], env=env,
                              capture_output=True, text=True, check=True, timeout=300)
        for key, value in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            ordered.setdefault(key, []).append(value)
        for key, code in _ALONE.items():
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300,
                           capture_output=True)
            alone.setdefault(key, []).append(time.perf_counter() - started)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        alone.setdefault("interpreter_start", []).append(time.perf_counter() - started)
    return {"after_airflow_in_task_order_s": {k: round(statistics.median(v), 3)
                                              for k, v in ordered.items()},
            "each_alone_process_wall_s": {k: round(statistics.median(v), 3)
                                          for k, v in alone.items()}}


def breakdown(days: int = 10, rows: int = 2000,
              variants: tuple[str, ...] = ("airflow-defaults", "compose"),
              importtime: bool = True, cli: bool = True) -> dict[str, Any]:
    """The catch-up per variant, one stack after the other, with the fresh-interpreter import
    costs and the command line's time for the same dates."""
    report: dict[str, Any] = {"machine": machine(), "fresh_imports": fresh_imports()}
    if cli:
        from bench.bench_catchup import cli_catchup

        report["cli"] = cli_catchup(days, rows)
    report["variants"] = [stack_breakdown(days, rows, v, importtime) for v in variants]
    base = report["variants"][0]
    for other in report["variants"][1:]:
        other["after_healthy_vs_first"] = round(other["catchup_after_healthy_s"]
                                                / base["catchup_after_healthy_s"], 2)
        other["steady_vs_first"] = round(other["first_sensor_end_to_last_run_end_s"]
                                         / base["first_sensor_end_to_last_run_end_s"], 2)
    if cli:
        for v in report["variants"]:
            v["after_healthy_vs_cli"] = round(v["catchup_after_healthy_s"]
                                              / report["cli"]["total_s"], 2)
            v["steady_vs_cli"] = round(v["first_sensor_end_to_last_run_end_s"]
                                       / report["cli"]["total_s"], 2)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--react", action="store_true", help="time to react (the default)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--breakdown", action="store_true",
                        help="where a catch-up's per-task seconds go, per variant")
    parser.add_argument("--days", type=int, default=10, help="with --breakdown")
    parser.add_argument("--variants", default="airflow-defaults,compose",
                        help=f"with --breakdown, comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--no-importtime", action="store_true",
                        help="with --breakdown: no PYTHONPROFILEIMPORTTIME for the scheduler")
    parser.add_argument("--no-cli", action="store_true", help="with --breakdown: skip the CLI side")
    args = parser.parse_args(argv)
    if args.breakdown:
        variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown:
            parser.error(f"unknown variant(s): {', '.join(unknown)}")
        result = breakdown(args.days, args.rows, variants, not args.no_importtime,
                           not args.no_cli)
    else:
        result = react(args.reps, args.rows)
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
