"""``make bench``: every benchmark, then ``bench/RESULTS.md`` (tables) and ``bench/out/results.json``."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.harness import DEFAULT_PG_URL, OUT, REPO, bench_repeated

SIZES = (100_000, 300_000, 1_000_000, 5_000_000)
BACKENDS = ("sqlite", "postgresql")
# the row-wise PostgreSQL baseline at 5M rows: measured when it ends within this many seconds
BASELINE_TIMEOUT_S = 1800
TARGET_SPEEDUP = 5
REPEATS = 3  # median of 3 paired runs at every size (the targets are judged on it)
TARGET_RSS_MB = 1024
TARGET_DAG_RATIO = 1.2
# pipeline / floor, median of the paired runs: in total at 1M rows and more, in total below
# 1M rows (where the fixed costs weigh), and per stage at 1M rows
TARGET_FLOOR_RATIO, TARGET_SMALL_FLOOR_RATIO, TARGET_STAGE_FLOOR_RATIO = 1.3, 1.6, 1.6


def machine() -> dict:
    """What the numbers were measured on."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                      if line.startswith("MemTotal"))
    except (OSError, StopIteration):
        mem_kb = 0
    pg_version = "?"
    try:
        import psycopg

        with psycopg.connect("postgresql://" + DEFAULT_PG_URL.split("://", 1)[1],
                             connect_timeout=5) as conn:
            pg_version = conn.execute("SHOW server_version").fetchone()[0]
    except Exception:
        pass
    from importlib.metadata import version

    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_kb / 2**20, 1),
        "os": platform.platform(), "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version, "postgresql": pg_version,
        "duckdb": version("duckdb"), "pyarrow": version("pyarrow"),
        "load_average_at_start": os.getloadavg(),
    }


def run_all(sizes: list[int] | None = None, pg_url: str | None = None,
            results: Path | None = None, repeat: int | None = None) -> int:
    """Run the matrix, the DAG parse and cron benchmarks; write RESULTS.md."""
    pg_url = pg_url or os.environ.get("TOKOKITA_BENCH_PG_URL") or DEFAULT_PG_URL
    results = results or REPO / "bench" / "RESULTS.md"
    started = time.time()
    data: dict = {"machine": machine(), "started": datetime.now(UTC).isoformat(timespec="seconds"),
                  "runs": []}
    for rows in sizes or SIZES:
        for backend in BACKENDS:
            print(f"[bench] {rows:,} rows on {backend} ...", file=sys.stderr, flush=True)
            report = bench_repeated(rows, backend, repeat or REPEATS,
                                    pg_url=pg_url, baseline_timeout=BASELINE_TIMEOUT_S)
            report["load_average_after"] = os.getloadavg()
            report["commit"] = _commit()
            report["measured"] = datetime.now(UTC).isoformat(timespec="seconds")
            print(f"[bench]   project {report.get('project_s')} s, floor ratio "
                  f"{report.get('floor_ratio')} {report.get('floor_ratio_spread')}, baseline "
                  f"{report.get('baseline_s')} s, speedup {report.get('speedup')}, "
                  f"RSS {report.get('project_peak_rss_mb')} MB, identical "
                  f"{report.get('identical_output')}", file=sys.stderr, flush=True)
            data["runs"].append(report)
    print("[bench] DAG parse ...", file=sys.stderr, flush=True)
    data["dag_parse"] = _child_json(["--dag-parse", "--json"])
    print("[bench] cron preview ...", file=sys.stderr, flush=True)
    data["cron"] = _child_json(["--cron", "--json"])
    data["total_s"] = round(time.time() - started, 1)
    saved = OUT / "results.json"
    if sizes and saved.exists():  # a partial re-run replaces only its own rows
        old = json.loads(saved.read_text(encoding="utf-8"))
        fresh = {(r["rows"], r["backend"]) for r in data["runs"]}
        data["runs"] = sorted([r for r in old["runs"] if (r["rows"], r["backend"]) not in fresh]
                              + data["runs"], key=lambda r: (r["rows"], r["backend"] != "sqlite"))
    (OUT / "results.json").parent.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    results.write_text(render(data), encoding="utf-8")
    print(f"[bench] wrote {results} in {data['total_s']} s", file=sys.stderr)
    return 0 if all(r.get("identical_output", True) for r in data["runs"]) else 1


def record_run(report: dict, results: Path | None = None) -> None:
    """One `python -m bench --rows N --backend B --record` run into bench/out/results.json
    (replacing the row of the same size and backend) and RESULTS.md re-written from it."""
    saved = OUT / "results.json"
    if not saved.exists():
        raise SystemExit(f"{saved} is missing: run `make bench` once before --record")
    data = json.loads(saved.read_text(encoding="utf-8"))
    run = dict(report)
    run["backend"] = "postgresql" if run["backend"] in ("postgres", "postgresql") else "sqlite"
    run.update(load_average_after=os.getloadavg(), commit=_commit(),
               measured=datetime.now(UTC).isoformat(timespec="seconds"))
    data["runs"] = sorted([r for r in data["runs"]
                           if (r["rows"], r["backend"]) != (run["rows"], run["backend"])]
                          + [run], key=lambda r: (r["rows"], r["backend"] != "sqlite"))
    saved.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    (results or REPO / "bench" / "RESULTS.md").write_text(render(data), encoding="utf-8")


def record_history(report: dict, results: Path | None = None) -> None:
    """One `python -m bench --history N --record` run into bench/out/results.json (replacing
    the last one) and RESULTS.md re-written from it."""
    saved = OUT / "results.json"
    if not saved.exists():
        raise SystemExit(f"{saved} is missing: run `make bench` once before --record")
    data = json.loads(saved.read_text(encoding="utf-8"))
    data["history"] = {**report, "load_average_after": os.getloadavg(), "commit": _commit(),
                       "measured": datetime.now(UTC).isoformat(timespec="seconds")}
    saved.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    (results or REPO / "bench" / "RESULTS.md").write_text(render(data), encoding="utf-8")


def history_section(history: dict) -> list[str]:
    """The lines of RESULTS.md's history table (`bench/bench_history.py`)."""
    n, few = history["history"], 10
    stores = {"files": "files (`state.json`)", "postgresql": "PostgreSQL (`state_url`)"}
    out = [
        "## A year of history",
        "",
        f"`python -m bench --history {n} --json` (`bench/bench_history.py`): nights of "
        f"{history['rows']:,} rows on an SQLite warehouse, nights 2-7 and "
        f"{n - 5}-{n} run for real, the ledger between them written directly; `status` and "
        "`due` are the commands (a process each), the gate a scheduled run's on a done date, "
        "the page the rows the status page shows, the sweep its look for changed raw files "
        "(`on_raw_change: reprocess`), with nothing of the watermark held from before. "
        "Seconds are the least of the six nights, and of "
        f"{history['repeat']} repetitions of each look (the machine's other work only adds "
        "time); the median nights' ratio beside it. Measured "
        f"{history.get('measured', '')}, commit {history.get('commit', '')}, load average "
        f"after {', '.join(f'{x:.1f}' for x in history.get('load_average_after', []))}.",
        "",
        f"| store | nights 2-7 s | nights {n - 5}-{n} s | ratio (median's) | look | "
        f"after {few} s | after {n} s | ratio |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for store, name in stores.items():
        figures = history.get(store)
        if not figures:
            continue
        night = (f"{min(figures['nights_early_s']):.3f} | {min(figures['nights_late_s']):.3f} | "
                 f"{figures['night_ratio']} ({figures['night_median_ratio']})")
        for look in ("status", "due", "gate", "page", "sweep"):
            if f"{look}_ratio" not in figures:  # a run from before the sweep was timed
                continue
            out.append(f"| {name} | {night} | {look} | {figures[f'{look}_{few}_s']:.4f} | "
                       f"{figures[f'{look}_{n}_s']:.4f} | {figures[f'{look}_ratio']} |")
            name, night = "", " | | "
    return [*out, ""]


def render_saved(results: Path | None = None) -> int:
    """Re-write RESULTS.md from the last run's bench/out/results.json."""
    data = json.loads((OUT / "results.json").read_text(encoding="utf-8"))
    (results or REPO / "bench" / "RESULTS.md").write_text(render(data), encoding="utf-8")
    return 0


def _commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=False)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "include", "bench/*.py"], cwd=REPO,
                           capture_output=True, text=True, check=False).stdout.strip()
    return proc.stdout.strip() + ("+local changes" if dirty else "")


def _child_json(args: list[str]) -> dict:
    """A benchmark in a fresh process (the DAG parse imports Airflow)."""
    proc = subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO, capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _spread_text(figures: dict, key: str = "floor_ratio_spread") -> str:
    """` (min-max)` of a repeated ratio, nothing for a single run."""
    spread = figures.get(key)
    if not spread or figures.get("repeat", 2) == 1 or spread[0] == spread[1]:
        return ""
    return f" ({spread[0]}-{spread[1]})"


def _fmt_s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def render(data: dict) -> str:
    """RESULTS.md from the collected figures."""
    m = data["machine"]
    out = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`python -m bench --all`); raw figures in `bench/out/results.json`",
        "(not committed). Each side runs in its own child process on a fresh warehouse (an SQLite",
        "file, or a new PostgreSQL database), on the same generated partition (the project's",
        "generator, seed 0, 3% dirty rows of every reason and 1% duplicates). Times are wall",
        "seconds of the whole child process (interpreter start and imports included); peak RSS",
        "is the child's own (its `VmHWM`; `ru_maxrss` is kept in the JSON). *project* is",
        "`run_for_date` (what `tokokita-etl run`",
        "does: extract, transform, load, validate, gold, watermark and manifest); *baseline* is",
        "`devtools/reference.py` (csv module, Decimal, a row loop, row-wise INSERTs in one",
        "transaction). *identical* = same gold file bytes, same quarantine counts per reason and",
        "same fact row count, and every repeated pipeline run gives the same gold and",
        "quarantine bytes and checksums as the first. `make bench` runs each size as",
        f"{REPEATS} *paired runs* (the pipeline side, then at once the floor side; the",
        "baseline in the first pair only) and the tables give the median of each figure, the",
        "median of the pairs' ratios and their spread (min-max); all runs are in the JSON.",
        "A row measured once (`python -m bench --rows N --backend B --record` without",
        "`--repeat`) is marked *(1 run)*.",
        "",
        "*floor* is what the database and the CPU allow for the same work, measured in the same",
        "run, on the same partition, in its own child process on a fresh warehouse with the",
        "pipeline's schema (`bench/floor.py`): reading and parsing the CSV once with",
        "`pyarrow.csv` (extract), DuckDB reading the staged extract and writing every row cast",
        "to its types (transform), the pipeline's final fact, summary and quarantine rows",
        "ingested in one transaction (SQLite: INSERTs of 256 rows each, the values already",
        "Python objects, order_date written into each statement; PostgreSQL: binary `COPY`)",
        "(load), and the fact checksum's read-back",
        "in key order, lines written by the database, SHA-256 (validate). *floor s* is the sum",
        "of the four; */ floor* is *project s* (interpreter start and imports included) over it.",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB RAM; {m['os']};",
        f"Python {m['python']}, SQLite {m['sqlite']}, PostgreSQL {m['postgresql']} (local, "
        f"default settings), DuckDB {m['duckdb']}, pyarrow {m['pyarrow']}. Measured "
        f"{data['started']}; load average at start "
        f"{', '.join(f'{x:.1f}' for x in m['load_average_at_start'])}"
        " (absolute times vary by tens of percent with the load average; both sides of a",
        "row ran back to back under the same conditions).",
        "",
        "## Pipeline vs plain-Python baseline",
        "",
        "| rows | backend | project s | baseline s | speedup | floor s | / floor "
        "| project peak RSS MB | baseline peak RSS MB | identical | commit |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in data["runs"]:
        baseline = r.get("baseline_s")
        note = ""
        if baseline is None and r.get("baseline_timeout_s"):
            note = f" (stopped after {r['baseline_timeout_s']:.0f} s)"
        once = " (1 run)" if r.get("repeat", 1) == 1 else ""
        floor = r.get("floor_s")
        floor_cells = ("n/a | n/a" if floor is None
                       else f"{floor:,.2f} | {r.get('floor_ratio')}x{_spread_text(r)}")
        out.append(
            f"| {r['rows']:,} | {r['backend']} | {_fmt_s(r.get('project_s'))}{once} | "
            f"{_fmt_s(baseline)}{note} | {r.get('speedup', 'n/a')} | "
            f"{floor_cells} | "
            f"{r.get('project_peak_rss_mb', 'n/a')} | {r.get('baseline_peak_rss_mb', 'n/a')} | "
            f"{r.get('identical_output', 'n/a')} | {r.get('commit', '')} |")
    out += ["", "Project per stage (seconds inside the run; the rest of *project s* is interpreter",
            "start, imports, watermark and manifest):", "",
            "| rows | backend | extract | transform | load | validate | publish | imports "
            "| before the run | in the run, outside the stages |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in data["runs"]:
        st = r.get("project_stages_s", {})
        fixed = r.get("project_fixed_s", {})
        out.append(f"| {r['rows']:,} | {r['backend']} | " + " | ".join(
            f"{st.get(k, 0):.2f}" for k in ("extract", "transform", "load", "validate",
                                            "publish_gold"))
            + f" | {r.get('project_import_s', 0):.2f} | "
            + " | ".join("n/a" if fixed.get(k) is None else f"{fixed[k]:.2f}"
                         for k in ("before_run", "in_run_outside_stages")) + " |")
    floored = [r for r in data["runs"] if r.get("floor_stages")]
    if floored:
        out += ["", "Project per stage against its floor (median pipeline s / median floor s; "
                "the ratio is the", "median of the pairs' ratios, their spread in brackets; "
                "the floor of each stage is described above):", "",
                "| rows | backend | extract | transform | load | validate | total |",
                "|---:|---|---|---|---|---|---|"]
        for r in floored:
            cells = [f"{v['pipeline_s']:.2f} / {v['floor_s']:.2f} = **{v['ratio']}x**"
                     + _spread_text(v, "ratio_spread")
                     if v.get("ratio") is not None else "n/a"
                     for v in (r["floor_stages"].get(k, {}) for k in
                               ("extract", "transform", "load", "validate"))]
            out.append(f"| {r['rows']:,} | {r['backend']} | " + " | ".join(cells)
                       + f" | {r['project_s']:.2f} / {r['floor_s']:.2f} = "
                         f"**{r['floor_ratio']}x**{_spread_text(r)} |")
    out += ["", "## Targets", "", "| target | figure | met |", "|---|---|---|"]
    for r in data["runs"]:
        size = {100_000: "100k", 300_000: "300k", 1_000_000: "1M", 5_000_000: "5M"}.get(r["rows"])
        if size is None:
            continue
        label = f"{size} rows, {r['backend']}"
        total_target = TARGET_FLOOR_RATIO if r["rows"] >= 1_000_000 else TARGET_SMALL_FLOOR_RATIO
        of = f" (median of {r['repeat']})" if r.get("repeat", 1) > 1 else " (1 run)"
        if r["rows"] == 1_000_000:
            out.append(f"| {label}: speedup >= {TARGET_SPEEDUP} | "
                       f"{r.get('speedup', 'n/a')} | "
                       f"{'yes' if (r.get('speedup') or 0) >= TARGET_SPEEDUP else 'no'} |")
        if r.get("floor_ratio") is not None:
            out.append(f"| {label}: pipeline / floor <= {total_target}{of} | "
                       f"{r['floor_ratio']}x{_spread_text(r)} | "
                       f"{'yes' if r['floor_ratio'] <= total_target else 'no'} |")
        if r.get("floor_ratio") is not None and r["rows"] == 1_000_000:
            worst, ratio = max(((k, v["ratio"]) for k, v in r["floor_stages"].items()
                                if v.get("ratio") is not None), key=lambda kv: kv[1])
            out.append(f"| {label}: every stage <= {TARGET_STAGE_FLOOR_RATIO}x its floor{of} | "
                       f"highest: {worst} {ratio}x | "
                       f"{'yes' if ratio <= TARGET_STAGE_FLOOR_RATIO else 'no'} |")
        if r["rows"] < 1_000_000:
            continue
        out.append(f"| {label}: completes, project peak RSS <= {TARGET_RSS_MB} MB | "
                   f"{_fmt_s(r.get('project_s'))} s, {r['project_peak_rss_mb']} MB | "
                   f"{'yes' if r['project_peak_rss_mb'] <= TARGET_RSS_MB else 'no'} |")
    dag = data["dag_parse"]
    out.append(f"| DAG parse <= {TARGET_DAG_RATIO}x an empty DAG, warm `DagBag` parse | "
               f"{dag['ratio']}x ({dag['ratio_to_same_shape']}x a same-shape DAG of "
               f"EmptyOperators) | {'yes' if dag['ratio'] <= TARGET_DAG_RATIO else 'no'} |")
    fresh = dag.get("fresh")
    if fresh:
        out.append(f"| DAG parse <= {TARGET_DAG_RATIO}x an empty DAG, fresh interpreter "
                   f"(Airflow's DAG loader test) | {fresh['ratio']}x | "
                   f"{'yes' if fresh['ratio'] <= TARGET_DAG_RATIO else 'no'} |")
    out += [
        "",
        "## DAG parse time",
        "",
        "`DagBag` of `dags/tokokita_orders_daily.py`, of an empty DAG, and of a DAG of the same",
        "shape built from Airflow's own parts (7 EmptyOperators, the same 3 Params, default_args",
        "and cron timetable), each in its own temporary folder, in one process after a warm-up",
        f"parse (imports cached), {dag['repeat']} alternating repetitions, medians:",
        "",
        "| DAG | median ms | min ms |",
        "|---|---:|---:|",
        f"| empty | {dag['empty_dag_ms']} | {dag['empty_min_ms']} |",
        f"| same shape, no project code | {dag['same_shape_dag_ms']} | |",
        f"| tokokita_orders_daily | {dag['project_dag_ms']} | {dag['project_min_ms']} |",
        "",
        f"Ratio to the empty DAG: **{dag['ratio']}x**; to the same-shape DAG: "
        f"**{dag['ratio_to_same_shape']}x**.",
        "",
        *([] if not fresh else [
            "Each file loaded by a new interpreter (`python FILE`, Airflow's DAG loader test: the",
            "interpreter start and Airflow's import are paid by every file alike, the project's",
            f"own imports only by its file), {fresh['repeat']} alternating runs, medians:",
            "",
            "| DAG | median ms |",
            "|---|---:|",
            f"| empty | {fresh['empty_ms']} |",
            f"| same shape, no project code | {fresh['same_shape_ms']} |",
            f"| tokokita_orders_daily | {fresh['project_ms']} |",
            "",
            f"Ratio to the empty DAG: **{fresh['ratio']}x**.",
            "",
        ]),
        "## Cron preview (100 runs)",
        "",
        "| expression | zone | ours ms | croniter ms | speedup |",
        "|---|---|---:|---:|---:|",
    ]
    cron = data["cron"]
    for c in cron["cases"]:
        out.append(f"| `{c['expression']}` | {c['tz']} | {c['ours_ms']} | {c['croniter_ms']} | "
                   f"{c['speedup_vs_croniter']} |")
    naive = cron["naive_scan"]
    out += ["", f"Against a naive minute-by-minute scan (`{naive['expression']}`, UTC): "
                f"{naive['ours_ms']} ms vs {naive['naive_ms']} ms ({naive['speedup_vs_naive']}x), "
                f"same runs: {naive['same_runs']}.", ""]
    if data.get("history"):
        out += history_section(data["history"])
    analysis = REPO / "bench" / "ANALYSIS.md"
    if analysis.exists():
        out.append(analysis.read_text(encoding="utf-8"))
    return "\n".join(out) + "\n"

