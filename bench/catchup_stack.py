"""Wall time of an N-day catch-up on the running stack (the stack side of `python -m bench --catchup`).

    .venv/bin/python -m bench.catchup_stack --days 30 [--rows 2000] [--celery]

Generates a good partition for each of the last N days, starts the compose services locally
on throw-away PostgreSQL databases (stack/ephemeral.py) with the DAG's start date N days
back and lookback_days=N, and measures the time until the scheduler's N catch-up runs have
all finished, plus the stack's peak memory. Prints one JSON object. `--celery`: the
scale-out profile (config/scale-out.env: two Celery workers, state in PostgreSQL, data in a
local S3-compatible server).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.bench_catchup import stage_seconds
from stack.ephemeral import (
    DAG_ID,
    EphemeralStack,
    dag_settings,
    fire_time,
    last_fired_day,
    partition_day,
)
from tokokita_etl.orders.contract import partition_path
from tokokita_etl.runner.stores import state_store


@dataclass
class CatchUp:
    """A finished catch-up on a throw-away stack that is still running."""

    stack: EphemeralStack
    days: list[date]
    runs: list[dict[str, Any]] = field(default_factory=list)
    start_to_healthy_s: float = 0.0
    total_s: float = 0.0

    def figures(self) -> dict[str, Any]:
        """Its timings and the stack's peak memory so far, as both catch-up reports give them."""
        peak = self.stack.peak_memory()
        return {
            "start_to_healthy_s": round(self.start_to_healthy_s, 1),
            "catchup_after_healthy_s": round(self.total_s - self.start_to_healthy_s, 1),
            "catchup_total_s": round(self.total_s, 1),
            "peak_rss_sum_mib": round(peak.get("rss", 0) / 2**20),
            "peak_pss_sum_mib": round(peak.get("pss", 0) / 2**20),
            "peak_processes": peak.get("processes"),
        }


@contextlib.contextmanager
def catchup(days: int, rows: int, *, celery: bool = False, timeout: float = 1800,
            poll_s: float = 2.0, extra_env: dict[str, str] | None = None,
            service_env: dict[str, dict[str, str]] | None = None) -> Iterator[CatchUp]:
    """Good partitions for the last `days` days, a throw-away stack whose DAG starts `days`
    back with lookback_days reaching them, started and waited for until its scheduled runs
    have all finished; the stack stays up inside the block and is torn down after it."""
    from devtools.samples import generate_partition
    from stack.rest import wait_for

    now = datetime.now(UTC)
    today = now.astimezone(dag_settings().tz).date()
    last_day = last_fired_day(now)
    first = last_day - timedelta(days=days - 1)
    dates = [first + timedelta(days=i) for i in range(days)]
    with tempfile.TemporaryDirectory(prefix="tokokita-catchup-") as tmp:
        stack = EphemeralStack(Path(tmp), start_date=(first + timedelta(days=1)).isoformat(),
                               end_date=fire_time(last_day).isoformat(),
                               tokokita_env={"TOKOKITA_LOOKBACK_DAYS": str((today - first).days)},
                               celery=celery)
        stack.target.extra_env.update(extra_env or {})
        stack.target.service_env.update(service_env or {})
        try:
            stack.prepare()
            for day in dates:
                made = partition_path(Path(tmp) / "generated", day)
                generate_partition(made, day, rows, seed=3)
                stack.write_raw(day, made.read_bytes())
            started = time.monotonic()
            stack.start()
            done = CatchUp(stack, dates, start_to_healthy_s=time.monotonic() - started)

            def finished():
                runs = [r for r in stack.api.dag_runs(DAG_ID) if r["run_type"] == "scheduled"]
                ended = [r for r in runs if r["state"] in ("success", "failed")]
                return runs if len(ended) == len(dates) else None

            done.runs = wait_for(finished, timeout, poll_s, f"{days} catch-up runs")
            done.total_s = time.monotonic() - started
            yield done
        finally:
            stack.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--celery", action="store_true", help="the scale-out profile")
    args = parser.parse_args(argv)

    with catchup(args.days, args.rows, celery=args.celery, timeout=args.timeout) as done:
        stack, days, runs = done.stack, done.days, done.runs
        with stack.object_store():
            marks = stack.watermark()
            stage_s = stage_seconds(state_store(stack.settings()), days)
        processed = sorted(d for d, e in marks.items() if e.get("status") == "success")
        report = {
            "profile": "scale-out (2 Celery workers)" if args.celery else "one machine",
            "days": args.days, "rows_per_partition": args.rows,
            "runs": len(runs), "failed_runs": sum(r["state"] == "failed" for r in runs),
            "processed": len(processed),
            "all_days_processed": processed == [d.isoformat() for d in days],
            "run_days_match": sorted(partition_day(r) for r in runs) == days,
            **done.figures(),
            "stage_s": round(stage_s, 1),
        }
    print(json.dumps(report, indent=2))
    return 0 if report["all_days_processed"] and report["run_days_match"] else 1


if __name__ == "__main__":
    sys.exit(main())
