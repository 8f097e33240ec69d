"""One side of a benchmark run, in its own process so its peak RSS is its own.

``python -m bench._child project|baseline|floor SPEC_JSON`` runs the pipeline (``run_for_date``,
as ``tokokita-etl run`` does), the plain-Python baseline or the floor (``bench.floor``) on one
partition and prints one JSON
object: seconds inside the process, per-stage seconds, and the process's peak RSS read from
its own resource usage (``getrusage(RUSAGE_SELF).ru_maxrss``, and Linux's ``VmHWM``).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

from tokokita_etl.orders.pipeline import ORDERS

STARTED = time.perf_counter()


def _peak_rss_mb() -> dict:
    out = {"ru_maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                out["vmhwm_mb"] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return out


def run_project(spec: dict) -> dict:
    """The project's pipeline for one date, end to end (extract to gold), fresh state."""
    from datetime import date

    from tokokita_etl.orders.contract import gold_path, quarantine_path
    from tokokita_etl.pipelines import load_settings
    from tokokita_etl.runner.sequence import run_for_date

    imported = time.perf_counter()
    work = Path(spec["work"])
    settings = load_settings(env={}, cwd=work, overrides={
        "raw_dir": Path(spec["raw_dir"]),
        "gold_dir": work / "gold",
        "quarantine_dir": work / "quarantine",
        "state_dir": work / "state",
        "staging_dir": work / "staging",
        "warehouse_url": spec["warehouse_url"],
    })
    lines: list[str] = []
    start = time.perf_counter()
    outcome = run_for_date(ORDERS, settings, date.fromisoformat(spec["date"]), log=lines.append)
    run_s = time.perf_counter() - start
    if outcome.exit_code != 0:
        raise SystemExit(f"project run failed: {outcome.error}\n" + "\n".join(lines))
    manifest = outcome.body
    return {
        "run_s": run_s,
        "import_s": imported - STARTED,
        "stages_s": {k: v / 1000 for k, v in manifest["stages_ms"].items()},
        "gold": str(gold_path(settings.gold_dir, date.fromisoformat(spec["date"]))),
        "quarantine": str(quarantine_path(settings.quarantine_dir,
                                          date.fromisoformat(spec["date"]))),
        "rows": manifest["rows"],
        "checksums": manifest["checksums"],
        "log": lines,
    }


def run_baseline_side(spec: dict) -> dict:
    """The plain-Python baseline (devtools.reference) for one date, fresh warehouse."""
    from datetime import date

    from devtools.reference import run_reference
    from tokokita_etl.orders.contract import partition_path  # the file name rule (stdlib only)

    imported = time.perf_counter()
    work = Path(spec["work"])
    day = date.fromisoformat(spec["date"])
    start = time.perf_counter()
    result = run_reference(partition_path(Path(spec["raw_dir"]), day), day,
                           spec["warehouse_url"], work / "gold", work / "quarantine")
    run_s = time.perf_counter() - start
    return {
        "run_s": run_s,
        "import_s": imported - STARTED,
        "stages_s": {},
        "gold": str(result["gold"]),
        "quarantine": str(result["quarantine"]),
        "rows": {"extracted": result["extracted"], "duplikat": result["duplikat"],
                 "fact": result["fact"], "summary": result["summary"],
                 "karantina": {k: v for k, v in result["karantina"].items() if v}},
    }


def main(argv: list[str]) -> int:
    """Entry point: ``project|baseline|floor SPEC_JSON``; the JSON result is the last stdout
    line."""
    side, spec = argv[0], json.loads(argv[1])
    if side == "floor":
        from bench.floor import run_floor

        result = run_floor(spec)
    else:
        result = run_project(spec) if side == "project" else run_baseline_side(spec)
    result.update(_peak_rss_mb())
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    if side == "project":
        # the process ends as `tokokita-etl` ends (an older checkout's way when it has none)
        from tokokita_etl import cli

        if hasattr(cli, "exit_now"):
            cli.exit_now(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
