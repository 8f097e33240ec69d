"""A backfill over partition dates on the local stack, against the command line processing the
same dates, in one run of the bench.

    python -m bench --backfill [--days 90] [--rows 2000] [--max-active-runs 3] [--json]

The command-line side generates N partitions (the last N dates whose run has fired) with the
sample generator and its seed, and runs `tokokita-etl run --date D` for each date in turn, each
a new process, on a fresh PostgreSQL database: what an operator without Airflow would do.

The stack side (a child process, `python -m bench.bench_backfill --stack-side`) starts the
compose services as local processes on throw-away PostgreSQL databases (stack/ephemeral.py)
with the DAG's catch-up window after the range (so that the scheduler makes no run of its
own), writes the same partitions, and once the stack is healthy runs `airflow backfill create`
over the range as dates, as a person types them: first Missing Runs on the empty ledger, then
All Runs over the same range (every date reprocessed, as a forced run). Each is timed from the
command to its last run finished.

`identical`: every date's gold file is the same bytes on both sides after each backfill.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from bench.harness import DEFAULT_PG_URL, REPO

#: the DAG's own max_active_runs (plugins/tokokita_airflow/dag.py): a backfill's default
MAX_ACTIVE_RUNS = 3


def backfill_dates(days: int) -> list[date]:
    """The last `days` dates whose scheduled run has fired, oldest first."""
    from stack.ephemeral import last_fired_day

    last = last_fired_day(datetime.now(UTC))
    return [last - timedelta(days=days - 1 - n) for n in range(days)]


def generate(folder: Path, dates: list[date], rows: int) -> None:
    """The partitions of `dates` in `folder`, as both sides read them."""
    from devtools.samples import generate_partition
    from tokokita_etl.orders.contract import partition_path

    for day in dates:
        generate_partition(partition_path(folder, day), day, rows, seed=3)


def digests(read) -> dict[str, str]:
    """Date -> the SHA-256 of its gold file, for each date `read(day)` returns bytes for."""
    return {day: hashlib.sha256(data).hexdigest() for day, data in read.items() if data}


def cli_side(dates: list[date], rows: int, pg_url: str) -> dict:
    """The dates run one after another through `tokokita-etl run` on PostgreSQL, as the
    catch-up bench's command-line side runs them."""
    from bench.bench_catchup import cli_dates

    total, failed, gold = cli_dates(
        dates, rows, pg_url, "cli-backfill",
        lambda work, env: digests({day.isoformat(): _read(
            work / "gold" / f"summary_harian_{day}.csv") for day in dates}))
    return {"s": round(total, 1), "failed_runs": failed, "gold": gold}


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


# -- the stack side (a child process) -------------------------------------------------------

def _airflow(stack, *args: str) -> None:
    """The stack's `airflow` command with the scheduler's environment; fails loudly."""
    env = stack.service_env()
    binary = Path(env["PATH"].split(os.pathsep)[0]) / "airflow"
    proc = subprocess.run([str(binary), *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"airflow {' '.join(args)} exited {proc.returncode}:\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")


def _backfill(stack, dates: list[date], behaviour: str, max_active_runs: int,
              timeout: float) -> float:
    """`airflow backfill create` over `dates` with `behaviour`; seconds until every run of the
    range has finished and the backfill is complete."""
    from stack.ephemeral import DAG_ID
    from stack.rest import wait_for

    keys = {day.isoformat() for day in dates}
    before = {r["dag_run_id"]: r.get("end_date") for r in stack.api.dag_runs(DAG_ID)}
    started = time.monotonic()
    _airflow(stack, "backfill", "create", "--dag-id", DAG_ID,
             "--from-date", dates[0].isoformat(), "--to-date", dates[-1].isoformat(),
             "--reprocess-behavior", behaviour, "--max-active-runs", str(max_active_runs))

    def finished():
        backfills = stack.api.get("/backfills", dag_id=DAG_ID)["backfills"]
        runs = [r for r in stack.api.dag_runs(DAG_ID) if r.get("partition_key") in keys]
        # a run cleared by All Runs is finished again once its end date moved on
        ended = [r for r in runs if r["state"] in ("success", "failed")
                 and r.get("end_date") != before.get(r["dag_run_id"])]
        return (len(ended) == len(keys) and all(b["completed_at"] for b in backfills)) or None

    wait_for(finished, timeout, 1.0, f"{behaviour} backfill of {len(dates)} dates")
    return time.monotonic() - started


def stack_side(days: int, rows: int, max_active_runs: int, timeout: float) -> dict:
    """Both backfills on a throw-away stack (see the module's docstring)."""
    from stack.ephemeral import DAG_ID, EphemeralStack

    dates = backfill_dates(days)
    tomorrow = dates[-1] + timedelta(days=3)
    with tempfile.TemporaryDirectory(prefix="tokokita-backfill-") as tmp:
        # the scheduled catch-up starts after the range: every run of the range is the
        # backfill's
        stack = EphemeralStack(Path(tmp), start_date=tomorrow.isoformat(), end_date=None)
        try:
            stack.prepare()
            generate(Path(tmp) / "generated", dates, rows)
            from tokokita_etl.orders.contract import partition_path

            for day in dates:
                stack.write_raw(day, partition_path(Path(tmp) / "generated", day).read_bytes())
            stack.start()
            stack.api.wait_dag(DAG_ID)
            figures = {"healthy_s": round(stack.timings["healthy_s"], 1)}
            gold = {}
            for behaviour, name in (("none", "missing_runs"), ("completed", "all_runs")):
                figures[f"{name}_s"] = round(
                    _backfill(stack, dates, behaviour, max_active_runs, timeout), 1)
                gold[name] = digests({day.isoformat(): stack.gold(day) for day in dates})
            marks = stack.watermark()
            figures["processed"] = sum(marks.get(day.isoformat(), {}).get("status") == "success"
                                       for day in dates)
            figures["attempts"] = sorted({marks.get(day.isoformat(), {}).get("attempt")
                                          for day in dates} - {None})
            peak = stack.peak_memory()
            figures["peak_rss_sum_mib"] = round(peak.get("rss", 0) / 2**20)
            return {**figures, "gold": gold}
        finally:
            stack.close()


def bench_backfill(days: int = 90, rows: int = 2000, pg_url: str = DEFAULT_PG_URL,
                   max_active_runs: int = MAX_ACTIVE_RUNS, timeout: float = 3600) -> dict:
    """Both sides and their ratios; `identical` when every gold file matches."""
    dates = backfill_dates(days)
    cli = cli_side(dates, rows, pg_url)
    proc = subprocess.run([sys.executable, "-m", "bench.bench_backfill", "--stack-side",
                           "--days", str(days), "--rows", str(rows),
                           "--max-active-runs", str(max_active_runs), "--timeout", str(timeout)],
                          cwd=REPO, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the stack side failed:\n{proc.stderr[-3000:]}")
    stack = json.loads(proc.stdout.strip().splitlines()[-1])
    identical = (len(cli["gold"]) == days and cli["failed_runs"] == 0
                 and all(gold == cli["gold"] for gold in stack.pop("gold").values()))
    cli_s = cli["s"]
    return {
        "days": days, "rows": rows, "max_active_runs": max_active_runs,
        "stack_s": stack["missing_runs_s"], "cli_s": cli_s,
        "ratio": round(stack["missing_runs_s"] / cli_s, 2),
        "all_runs_s": stack["all_runs_s"],
        "all_runs_ratio": round(stack["all_runs_s"] / cli_s, 2),
        "per_date_s": {"stack": round(stack["missing_runs_s"] / days, 2),
                       "cli": round(cli_s / days, 2)},
        "stack_healthy_s": stack["healthy_s"], "processed": stack["processed"],
        "attempts": stack["attempts"], "peak_rss_sum_mib": stack["peak_rss_sum_mib"],
        "identical": identical,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack-side", action="store_true")
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--max-active-runs", type=int, default=MAX_ACTIVE_RUNS)
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args(argv)
    if not args.stack_side:
        parser.error("run it as `python -m bench --backfill`")
    # the stack's own output (its services' logs go to files) stays off the JSON line
    with contextlib.redirect_stdout(sys.stderr):
        report = stack_side(args.days, args.rows, args.max_active_runs, args.timeout)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
