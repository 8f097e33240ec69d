"""``python -m bench``: the pipeline against the plain-Python baseline, and the other benchmarks.

    python -m bench --rows 1000000 --backend sqlite --json   # one size, one backend
    python -m bench --dag-parse                              # DAG parse time vs an empty DAG
    python -m bench --all                                    # everything; writes bench/RESULTS.md
    python -m bench --catchup --scale-out                    # 30-day catch-up: 2 workers vs 1 machine
    python -m bench --object-storage --rows 1000000          # object storage vs local folders
    python -m bench --react                                  # time to react on a running stack
    python -m bench --backfill --days 90 --rows 2000 --json  # `airflow backfill create` vs the CLI
    python -m bench --history 365 --json                     # a year of history vs 10 nights
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# the pipeline of this checkout, whatever the environment has installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "include"))


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, help="rows in the generated partition")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pg-url", default=None,
                        help="server for PostgreSQL runs (a fresh tokokita_bench_* database "
                             "is created per side); default TOKOKITA_BENCH_PG_URL or the local "
                             "trust server")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --rows: N paired runs (the pipeline, then the floor, N "
                             "times; the baseline in the first pair only): medians, and the "
                             "spread (min, max) of the ratios; with --all: pairs per size "
                             "(default 3)")
    parser.add_argument("--side", choices=("both", "project", "baseline"), default="both")
    parser.add_argument("--no-floor", action="store_true",
                        help="skip the floor (the database's and CPU's fastest way to do the "
                             "same work, measured after the pipeline side)")
    parser.add_argument("--record", action="store_true",
                        help="merge this run into bench/out/results.json (replacing the row "
                             "of the same size and backend) and re-write bench/RESULTS.md")
    parser.add_argument("--keep", action="store_true", help="keep the run folders in bench/out")
    parser.add_argument("--out", type=Path, default=None,
                        help="work folder for generated partitions and runs (default bench/out)")
    parser.add_argument("--project-src", type=Path, default=None,
                        help="import the pipeline from this include/ folder (e.g. an older "
                             "checkout, for a before/after comparison)")
    parser.add_argument("--dag-parse", action="store_true", help="DAG parse time vs an empty DAG")
    parser.add_argument("--cron", action="store_true", help="cron preview of 100 runs")
    parser.add_argument("--catchup", action="store_true",
                        help="30-day catch-up on the local stack vs the same dates via the CLI")
    parser.add_argument("--scale-out", action="store_true",
                        help="with --catchup: the one-machine stack beside the two-worker "
                        "scale-out profile")
    parser.add_argument("--object-storage", action="store_true",
                        help="one partition (--rows, default 1000000) with local folders and "
                        "with object storage")
    parser.add_argument("--react", action="store_true",
                        help="time to react on a running local stack: a partition landing to "
                        "its run starting (reschedule and deferrable sensor), a bad partition "
                        "to its run's failure (bench/bench_react.py)")
    parser.add_argument("--backfill", action="store_true",
                        help="`airflow backfill create` over --days partition dates (default "
                        "90) of --rows rows (default 2000) on the local stack vs the same dates "
                        "via the CLI (bench/bench_backfill.py)")
    parser.add_argument("--max-active-runs", type=int, default=None,
                        help="with --backfill: the backfill's max_active_runs (default: the "
                        "DAG's, 3)")
    parser.add_argument("--days", type=int, default=None,
                        help="with --catchup (default 30) or --backfill (default 90)")
    parser.add_argument("--history", type=int, default=None, metavar="NIGHTS",
                        help="a night's run and status, due, the gate and the page's rows "
                        "after 10 nights and after NIGHTS nights, both state stores "
                        "(bench/bench_history.py)")
    parser.add_argument("--history-rows", type=int, default=2000,
                        help="with --history: rows per night's partition")
    parser.add_argument("--history-repeat", type=int, default=5,
                        help="with --history: repetitions of each look (the least is kept)")
    parser.add_argument("--catchup-rows", type=int, default=2000, help="with --catchup")
    parser.add_argument("--all", action="store_true",
                        help="100k, 300k, 1M, 5M rows on both backends, DAG parse, cron; "
                             "writes bench/RESULTS.md")
    parser.add_argument("--sizes", default=None,
                        help="with --all: comma-separated row counts (default 100000,300000,1000000,5000000)")
    parser.add_argument("--results", type=Path, default=None, help="with --all: output file")
    parser.add_argument("--render", action="store_true",
                        help="re-write bench/RESULTS.md from bench/out/results.json")
    args = parser.parse_args(argv)

    if args.all:
        from bench.report import run_all

        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
        return run_all(sizes=sizes, pg_url=args.pg_url, results=args.results,
                       repeat=args.repeat if args.repeat > 1 else None)
    if args.render:
        from bench.report import render_saved

        return render_saved(args.results)
    if args.dag_parse:
        from bench.bench_dag import bench_dag_parse

        print(json.dumps(bench_dag_parse(), indent=None if args.json else 2))
        return 0
    if args.react:
        from bench.bench_react import react

        print(json.dumps(react(), indent=None if args.json else 2, default=str))
        return 0
    if args.backfill:
        from bench.bench_backfill import MAX_ACTIVE_RUNS, bench_backfill

        report = bench_backfill(args.days or 90, args.rows or 2000,
                                args.pg_url or os.environ.get("TOKOKITA_BENCH_PG_URL")
                                or "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
                                args.max_active_runs or MAX_ACTIVE_RUNS)
        print(json.dumps(report, indent=None if args.json else 2))
        return 0 if report["identical"] else 1
    if args.history is not None:
        if args.project_src:  # (before anything imports the pipeline)
            sys.path.insert(0, str(args.project_src.resolve()))
        from bench.bench_history import bench_history

        report = bench_history(
            args.history, args.history_rows, out=args.out or Path(__file__).parent / "out",
            pg_url=args.pg_url or os.environ.get("TOKOKITA_BENCH_PG_URL")
            or "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
            repeat=max(args.history_repeat, 1))
        if args.record:
            from bench.report import record_history

            record_history(report, args.results)
        print(json.dumps(report, indent=None if args.json else 2))
        return 0
    if args.catchup and args.scale_out:
        from bench.bench_catchup import bench_scale_out_catchup

        print(json.dumps(bench_scale_out_catchup(args.days or 30, args.catchup_rows),
                         indent=None if args.json else 2))
        return 0
    if args.object_storage:
        from bench.bench_object_storage import bench_object_storage

        print(json.dumps(bench_object_storage(
            args.rows or 1_000_000, args.pg_url or os.environ.get("TOKOKITA_BENCH_PG_URL")
            or "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"),
            indent=None if args.json else 2))
        return 0
    if args.catchup:
        from bench.bench_catchup import bench_catchup

        print(json.dumps(bench_catchup(args.days or 30, args.catchup_rows,
                                       args.pg_url or os.environ.get("TOKOKITA_BENCH_PG_URL")
                                       or "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"),
                         indent=None if args.json else 2))
        return 0
    if args.cron:
        from bench.bench_cron import bench_cron_preview

        print(json.dumps(bench_cron_preview(), indent=None if args.json else 2))
        return 0
    if not args.rows:
        parser.error("--rows is required (or --all, --dag-parse, --cron)")

    from bench.harness import DEFAULT_PG_URL, OUT, bench_repeated

    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    pg_url = args.pg_url or os.environ.get("TOKOKITA_BENCH_PG_URL") or DEFAULT_PG_URL
    sides = ("project",) if args.side in ("both", "project") else ()
    if "project" in sides and not args.no_floor:
        sides += ("floor",)  # right after the pipeline side: the two halves of a pair
    if args.side in ("both", "baseline"):
        sides += ("baseline",)
    backend = "postgresql" if args.backend == "postgres" else "sqlite"
    report = bench_repeated(args.rows, backend, args.repeat, sides=sides, seed=args.seed,
                            pg_url=pg_url, keep=args.keep, out=args.out or OUT,
                            project_src=args.project_src)
    report["backend"] = args.backend
    if args.record:
        from bench.report import record_run

        record_run(report, args.results)
    if args.json:
        print(json.dumps(report))
    else:
        print(format_report(report))
    return 0 if report.get("identical_output", True) else 1


def format_report(report: dict) -> str:
    """A few human-readable lines."""
    repeat = report.get("repeat", 1)
    lines = [f"{report['rows']:,} rows on {report['backend']}"
             + (f", median of {repeat} paired runs" if repeat > 1 else "")]
    for side in ("project", "baseline"):
        if f"{side}_s" in report:
            lines.append(f"  {side:<9} {report[f'{side}_s']:>8.2f} s   peak RSS "
                         f"{report[f'{side}_peak_rss_mb']:>7.1f} MB")
    if "speedup" in report:
        lines.append(f"  speedup   {report['speedup']:.2f}x   identical output: "
                     f"{report['identical_output']}")
    if report.get("project_stages_s"):
        lines.append("  stages    " + ", ".join(f"{k} {v:.2f}s"
                                               for k, v in report["project_stages_s"].items()))
    if report.get("floor_s"):
        low, high = report.get("floor_ratio_spread", [report["floor_ratio"]] * 2)
        lines.append(f"  floor     {report['floor_s']:>8.2f} s   pipeline / floor "
                     f"{report['floor_ratio']:.2f}x ({low:.2f}-{high:.2f}x)")
        lines.append("  / floor   " + ", ".join(
            f"{k} {v['pipeline_s']:.2f}/{v['floor_s']:.2f}s {v['ratio']}x"
            + (f" ({v['ratio_spread'][0]}-{v['ratio_spread'][1]})"
               if v.get("ratio_spread") and repeat > 1 else "")
            for k, v in report["floor_stages"].items() if v["pipeline_s"] is not None))
    if report.get("project_fixed_s"):
        fixed = report["project_fixed_s"]
        lines.append(f"  fixed     {fixed['before_run']:.2f} s before the run (interpreter, "
                     f"imports, settings), {fixed['in_run_outside_stages']:.2f} s in it "
                     "outside the stages")
    if "identical_output" in report and "speedup" not in report:
        lines.append(f"  identical output: {report['identical_output']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
