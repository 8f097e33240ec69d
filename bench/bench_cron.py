"""Benchmark: previewing 100 cron runs, against croniter and a naive minute-by-minute scan.

Both baselines are measured in the same process and run, so the ratios are comparable
across machines; absolute milliseconds are not.  Run: ``python -m bench.bench_cron``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from tokokita_etl.cron import CronSchedule, next_runs, parse
from tokokita_etl.settings.model import default

RUNS = 100
#: the pipeline's default time zone
PIPELINE_ZONE = default("timezone")
AFTER = datetime(2026, 11, 5, 0, 10)
CASES = (
    ("30 2 * * *", PIPELINE_ZONE),
    ("*/5 * * * *", PIPELINE_ZONE),
    ("0 0 1 * 0", PIPELINE_ZONE),
    ("0 9-17 * * 1-5", PIPELINE_ZONE),
    ("0 0 29 2 *", PIPELINE_ZONE),
    ("30 2 * * *", "America/New_York"),
    ("*/15 * * * *", "Europe/Berlin"),
)


def _best_ms(fn: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def _croniter_runs(expr: str, after: datetime, count: int) -> list[datetime]:
    it = croniter(expr, after)
    return [it.get_next(datetime) for _ in range(count)]


def _naive_scan(schedule: CronSchedule, after: datetime, count: int) -> list[datetime]:
    """The reference implementation's approach: test every minute in turn."""
    runs = []
    candidate = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while len(runs) < count:
        if schedule.matches(candidate):
            runs.append(candidate)
        candidate += timedelta(minutes=1)
    return runs


def bench_cron_preview() -> dict:
    """Time next_runs for 100 runs of several expressions and return ratios to baselines."""
    cases = []
    for expr, tz in CASES:
        after = AFTER.replace(tzinfo=ZoneInfo(tz))
        ours = next_runs(expr, after, RUNS, tz)
        theirs = _croniter_runs(expr, after, RUNS)
        ours_ms = _best_ms(lambda expr=expr, tz=tz, after=after: next_runs(expr, after, RUNS, tz))
        croniter_ms = _best_ms(lambda expr=expr, after=after: _croniter_runs(expr, after, RUNS))
        cases.append(
            {
                "expression": expr,
                "tz": tz,
                "ours_ms": round(ours_ms, 3),
                "croniter_ms": round(croniter_ms, 3),
                "speedup_vs_croniter": round(croniter_ms / ours_ms, 2),
                # croniter has its own DST rules, so only no-DST zones must agree exactly
                "same_runs_as_croniter": [r.timestamp() for r in ours] == [r.timestamp() for r in theirs],
            }
        )
    expr = "30 2 * * *"
    schedule = parse(expr)
    ours_ms = _best_ms(lambda: next_runs(expr, AFTER, RUNS, "UTC"), repeat=3)
    naive_ms = _best_ms(lambda: _naive_scan(schedule, AFTER, RUNS), repeat=1)
    naive_runs = _naive_scan(schedule, AFTER, RUNS)
    ours_runs = [r.replace(tzinfo=None) for r in next_runs(expr, AFTER, RUNS, "UTC")]
    return {
        "runs_per_preview": RUNS,
        "cases": cases,
        "min_speedup_vs_croniter": min(c["speedup_vs_croniter"] for c in cases),
        "naive_scan": {
            "expression": expr,
            "ours_ms": round(ours_ms, 3),
            "naive_ms": round(naive_ms, 3),
            "speedup_vs_naive": round(naive_ms / ours_ms, 1),
            "same_runs": naive_runs == ours_runs,
        },
    }


if __name__ == "__main__":
    print(json.dumps(bench_cron_preview(), indent=2))
