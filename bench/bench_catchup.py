"""A 30-day catch-up: on the local Airflow stack against the same dates one after another
through the command line.

    python -m bench --catchup [--days 30] [--catchup-rows 2000]

The stack side is ``bench/catchup_stack.py`` (it starts the compose services as local
processes on throw-away PostgreSQL databases and waits for the scheduler's N catch-up runs).
The command-line side generates N partitions of the same size with the same generator and
seed, then runs ``tokokita-etl run --date D`` for each date in turn, each a new process, on a
fresh PostgreSQL database: what an operator without Airflow would do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from bench.harness import DEFAULT_PG_URL, REPO, Warehouses
from devtools.samples import generate_partition
from tokokita_etl.orders.contract import partition_path
from tokokita_etl.pipelines import load_settings
from tokokita_etl.runner.stores import state_store


def cli_dates(dates: list[date], rows: int, pg_url: str, side: str,
              collect: Callable[[Path, dict[str, str]], Any]) -> tuple[float, int, Any]:
    """`dates` generated (`rows` a partition, the stacks' seed) and run one after another
    through `tokokita-etl run`, each a new process, on a fresh PostgreSQL database: (seconds,
    failed runs, what `collect(work folder, environment)` read before the folder goes)."""
    work = Path(tempfile.mkdtemp(prefix=f"tokokita-{side}-"))
    warehouses = Warehouses("postgresql", work, pg_url)
    try:
        for day in dates:
            generate_partition(partition_path(work / "raw", day), day, rows, seed=3)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOKOKITA_")}
        env.update({
            "TOKOKITA_RAW_DIR": str(work / "raw"), "TOKOKITA_GOLD_DIR": str(work / "gold"),
            "TOKOKITA_QUARANTINE_DIR": str(work / "quarantine"),
            "TOKOKITA_STATE_DIR": str(work / "state"), "TOKOKITA_STAGING_DIR": str(work / "staging"),
            "TOKOKITA_WAREHOUSE_URL": warehouses.fresh(side.replace("-", "_")),
            "PYTHONPATH": os.pathsep.join([str(REPO / "include"), env.get("PYTHONPATH", "")]),
        })
        cli = Path(sys.executable).with_name("tokokita-etl")
        started = time.perf_counter()
        failed = 0
        for day in dates:
            proc = subprocess.run([str(cli), "run", "--date", day.isoformat()], cwd=work, env=env,
                                  capture_output=True, text=True, check=False)
            failed += proc.returncode != 0
        return time.perf_counter() - started, failed, collect(work, env)
    finally:
        warehouses.drop_all()
        shutil.rmtree(work, ignore_errors=True)


def cli_catchup(days: int, rows: int, pg_url: str = DEFAULT_PG_URL) -> dict:
    """N dates run one after another through `tokokita-etl run` on PostgreSQL."""
    last = date.today() - timedelta(days=1)
    dates = [last - timedelta(days=days - 1 - i) for i in range(days)]
    total, failed, stage_s = cli_dates(
        dates, rows, pg_url, "cli-catchup",
        lambda work, env: stage_seconds(state_store(load_settings(env=env, cwd=work)), dates))
    return {"days": days, "rows_per_partition": rows, "failed_runs": failed,
            "total_s": round(total, 1), "per_date_s": round(total / days, 2),
            "stage_s": round(stage_s, 1), "outside_stages_s": round(total - stage_s, 1)}


def stage_seconds(store, dates: list[date]) -> float:
    """The data share of a catch-up: the seconds its stages recorded (each date's newest
    manifest, `stages_ms`), whichever processes ran them."""
    total_ms = 0
    for day in dates:
        newest = next(iter(store.manifests(day)), None)
        total_ms += sum((newest or {}).get("stages_ms", {}).values())
    return total_ms / 1000


def stack_catchup(days: int, rows: int, *, celery: bool = False) -> dict:
    """The catch-up on a throw-away running stack (a child process); `celery`: the scale-out
    profile."""
    proc = subprocess.run([sys.executable, "-m", "bench.catchup_stack", "--days", str(days),
                           "--rows", str(rows), *(["--celery"] if celery else [])], cwd=REPO,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0 and not proc.stdout.strip():
        raise RuntimeError(f"stack catch-up failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout[proc.stdout.index("{"):])


def bench_catchup(days: int = 30, rows: int = 2000, pg_url: str = DEFAULT_PG_URL) -> dict:
    """Both sides and the ratio."""
    cli = cli_catchup(days, rows, pg_url)
    stack = stack_catchup(days, rows)
    return {"cli": cli, "stack": stack,
            # the data share: the stages' own seconds on each side; the stack runs up to three
            # dates at once, so its summed stage seconds can exceed its wall time (their ratio
            # is how many stages ran at once on average)
            "stage_s": {"cli": cli["stage_s"], "stack": stack["stage_s"]},
            "stack_stages_at_once": round(stack["stage_s"] / stack["catchup_after_healthy_s"], 2),
            "stack_vs_cli": round(stack["catchup_total_s"] / cli["total_s"], 2),
            "stack_after_healthy_vs_cli": round(stack["catchup_after_healthy_s"] / cli["total_s"],
                                                2)}


def bench_scale_out_catchup(days: int = 30, rows: int = 2000) -> dict:
    """The same catch-up on the one-machine stack and on the two-worker scale-out profile,
    one after the other in one run, and their ratio."""
    one = stack_catchup(days, rows)
    two = stack_catchup(days, rows, celery=True)
    return {"one_machine": one, "two_workers": two,
            "two_workers_vs_one_machine": round(two["catchup_total_s"] / one["catchup_total_s"],
                                                2),
            "after_healthy_ratio": round(two["catchup_after_healthy_s"]
                                         / one["catchup_after_healthy_s"], 2)}
