"""Per-stage time and peak RSS of the pipeline on one generated partition (for profiling).

    python -m bench.stages --rows 1000000 --backend sqlite [--stage validate --repeat 3]

Runs the stages in this process, one after another, resetting the kernel's RSS high-water
mark before each (``/proc/self/clear_refs``), so each stage's own peak is shown. With
``--stage S --repeat N`` the stages before S run once and S runs N times (to profile it, e.g.
under ``py-spy record -o s.svg -- python -m bench.stages ...``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import time
import uuid
from datetime import date
from pathlib import Path

from bench.harness import DAY, DEFAULT_PG_URL, OUT, Warehouses, partition
from tokokita_etl.orders.pipeline import ORDERS


def _hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _reset_hwm() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.stages")
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--stage", default=None)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args(argv)

    from tokokita_etl.pipelines import load_settings
    from tokokita_etl.runner.staging import run_stage

    raw_dir, _ = partition(args.rows)
    work = OUT / "runs" / f"stages-{uuid.uuid4().hex[:8]}"
    backend = "postgresql" if args.backend == "postgres" else "sqlite"
    warehouses = Warehouses(backend, work, args.pg_url)
    try:
        settings = load_settings(env={}, cwd=work, overrides={
            "raw_dir": raw_dir, "gold_dir": work / "gold", "quarantine_dir": work / "quarantine",
            "state_dir": work / "state", "staging_dir": work / "staging",
            "warehouse_url": warehouses.fresh("project")})
        day: date = DAY
        print(f"start: RSS high-water {_hwm_mb():.0f} MB")
        for stage in ORDERS.stage_names:
            times = []
            for _ in range(args.repeat if stage == args.stage else 1):
                _reset_hwm()
                start = time.perf_counter()
                result, _lines = run_stage(ORDERS, settings, day, stage)
                times.append(time.perf_counter() - start)
            print(f"{stage:<13} {min(times):7.3f} s  peak RSS {_hwm_mb():7.0f} MB"
                  + (f"  (best of {len(times)})" if len(times) > 1 else ""))
            if stage == "validate":
                print("  checksums", json.dumps(result["checksums"]))
    finally:
        warehouses.drop_all()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
