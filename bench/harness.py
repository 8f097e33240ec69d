"""The pipeline against the plain-Python baseline on one generated partition.

The parent process stays small (standard library, the generator and psycopg for creating
databases); each side runs in its own child process (``bench._child``) on a fresh warehouse,
so wall time includes interpreter start and imports, exactly what a user of the command line
pays, and the peak RSS a child reports is its own.
"""

from __future__ import annotations

import compileall
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "include") not in sys.path:  # the pipeline of this checkout
    sys.path.insert(0, str(REPO / "include"))

from devtools.samples import generate_partition  # noqa: E402
from tokokita_etl.orders.contract import partition_path  # noqa: E402

OUT = REPO / "bench" / "out"
DAY = date(2026, 11, 10)
SEED = 0
DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PG_DB_PREFIX = "tokokita_bench_"


def partition(rows: int, *, seed: int = SEED, day: date = DAY, out: Path = OUT) -> tuple[Path, dict]:
    """The raw folder holding a generated partition of `rows` rows (generated once, cached)."""
    raw_dir = out / "data" / f"rows-{rows}-seed-{seed}"
    raw_file = partition_path(raw_dir, day)
    counts_file = raw_dir / "counts.json"
    if raw_file.exists() and counts_file.exists():
        return raw_dir, json.loads(counts_file.read_text(encoding="utf-8"))
    counts = generate_partition(raw_file, day, rows, seed=seed)
    counts_file.write_text(json.dumps(counts) + "\n", encoding="utf-8")
    return raw_dir, counts


class Warehouses:
    """Fresh, empty warehouses for one side: an SQLite file, or a new PostgreSQL database."""

    def __init__(self, backend: str, work: Path, pg_url: str) -> None:
        self.backend, self.work, self.pg_url = backend, work, pg_url
        self.created: list[str] = []

    def fresh(self, side: str) -> str:
        if self.backend == "sqlite":
            path = self.work / side / "warehouse" / "tokokita.db"
            path.parent.mkdir(parents=True, exist_ok=True)
            return f"sqlite:///{path}"
        name = f"{PG_DB_PREFIX}{side}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        base, _, _ = self.pg_url.rpartition("/")
        return f"{base}/{name}"

    def _admin(self):
        import psycopg

        base = self.pg_url.split("://", 1)[1]
        return psycopg.connect(f"postgresql://{base}", autocommit=True, connect_timeout=10)

    def drop_all(self) -> None:
        if not self.created:
            return
        with self._admin() as conn:
            for name in self.created:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.created.clear()


def run_side(side: str, spec: dict, *, timeout: float | None = None,
             include_dir: Path | None = None) -> dict:
    """Run one side in a child process; its JSON result plus the wall time seen from here.
    `include_dir`: import the pipeline from another source tree (a before/after comparison).

    The source tree is byte-compiled first, as pip compiles an installed package and as
    `make setup` compiles this one: with PYTHONDONTWRITEBYTECODE set, every run would
    otherwise compile the pipeline's modules again (0.1-0.2 s of each run at any size)."""
    source = include_dir or REPO / "include"
    compileall.compile_dir(source / "tokokita_etl", quiet=1)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(source), str(REPO), os.environ.get("PYTHONPATH", "")])}
    env = {k: v for k, v in env.items() if not k.startswith("TOKOKITA_")}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench._child", side, json.dumps(spec)],
                          cwd=spec["work"], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{side} side failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
                           f"\n{proc.stdout[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def quarantine_counts(path: Path) -> dict[str, int]:
    """Rows per reason in a quarantine CSV."""
    with open(path, encoding="utf-8", newline="") as handle:
        return dict(sorted(Counter(row["reason"] for row in csv.DictReader(handle)).items()))


def _peak(result: dict) -> float:
    """The child's peak RSS: the kernel's high-water mark of its own process image (VmHWM);
    `ru_maxrss` also counts the parent's RSS at the fork, which exec does not reset."""
    return result.get("vmhwm_mb", result["ru_maxrss_mb"])


def compare(project: dict, baseline: dict) -> dict:
    """Same gold file bytes, same quarantine counts per reason (and the same quarantine file)?"""
    gold_same = Path(project["gold"]).read_bytes() == Path(baseline["gold"]).read_bytes()
    p_counts = quarantine_counts(Path(project["quarantine"]))
    b_counts = dict(sorted({**baseline["rows"]["karantina"],
                            **({"duplicate": baseline["rows"]["duplikat"]}
                               if baseline["rows"]["duplikat"] else {})}.items()))
    q_file_same = (Path(project["quarantine"]).read_bytes()
                   == Path(baseline["quarantine"]).read_bytes())
    facts_same = project["rows"]["fact"] == baseline["rows"]["fact"]
    return {
        "identical_gold": gold_same,
        "identical_quarantine_counts": p_counts == b_counts,
        "identical_quarantine_file": q_file_same,
        "identical_fact_rows": facts_same,
        "quarantine_counts": p_counts,
        "baseline_quarantine_counts": b_counts,
        "identical_output": gold_same and p_counts == b_counts and facts_same,
    }


FLOOR_STAGES = ("extract", "transform", "load", "validate")


def floor_report(project: dict, floor: dict) -> dict:
    """The floor beside the pipeline: per stage the pipeline's seconds (its stage records),
    the floor's and their ratio; in total the pipeline's wall seconds (interpreter start and
    imports included) over the sum of the stage floors."""
    stages = {}
    for stage in FLOOR_STAGES:
        p, f = project["stages_s"].get(stage), floor["stages_s"][stage]
        stages[stage] = {"pipeline_s": None if p is None else round(p, 3),
                         "floor_s": round(f, 3),
                         "ratio": None if p is None or f <= 0 else round(p / f, 2)}
    floor_s = sum(floor["stages_s"][s] for s in FLOOR_STAGES)
    return {
        "floor_s": round(floor_s, 3),
        "floor_ratio": round(project["wall_s"] / floor_s, 2) if floor_s > 0 else None,
        "floor_stages": stages,
        "floor_checks": {
            "parsed_rows": floor["parsed_rows"],
            "loaded_rows": floor["loaded_rows"],
            # equal unless a fact value needs a JSON escape (the floor does not handle one)
            "same_fact_checksum": floor["fact_checksum"] in project["checksums"].values(),
        },
        "floor_wall_s": round(floor["wall_s"], 3),
    }


def bench_once(rows: int, backend: str, *, seed: int = SEED, out: Path = OUT,
               pg_url: str = DEFAULT_PG_URL, keep: bool = False,
               sides: tuple[str, ...] = ("project", "baseline", "floor"),
               baseline_timeout: float | None = None, project_src: Path | None = None) -> dict:
    """Generate (or reuse) the partition, run both sides on fresh warehouses, compare; with
    "floor" in `sides` (after "project"), measure the floor on a third fresh warehouse."""
    raw_dir, generated = partition(rows, seed=seed, out=out)
    work = out / "runs" / f"{backend}-{rows}-{uuid.uuid4().hex[:8]}"
    warehouses = Warehouses(backend, work, pg_url)
    results: dict[str, dict] = {}
    urls: dict[str, str] = {}
    timed_out = None
    try:
        for side in sides:
            if side == "floor" and "project" not in results:
                continue  # the floor ingests the pipeline side's final rows
            side_work = work / side
            side_work.mkdir(parents=True, exist_ok=True)
            spec = {"work": str(side_work), "raw_dir": str(raw_dir), "date": DAY.isoformat(),
                    "warehouse_url": warehouses.fresh(side)}
            urls[side] = spec["warehouse_url"]
            if side == "floor":
                spec["source_url"] = urls["project"]
            try:
                results[side] = run_side(
                    side, spec, timeout=baseline_timeout if side == "baseline" else None,
                    include_dir=project_src if side == "project" else None)
            except subprocess.TimeoutExpired:
                timed_out = baseline_timeout
        report: dict = {"rows": rows, "backend": backend}
        if timed_out:
            report["baseline_timeout_s"] = timed_out
        project, baseline = results.get("project"), results.get("baseline")
        if project:
            report["project_s"] = round(project["wall_s"], 3)
            report["project_peak_rss_mb"] = _peak(project)
        if baseline:
            report["baseline_s"] = round(baseline["wall_s"], 3)
            report["baseline_peak_rss_mb"] = _peak(baseline)
        if project and baseline:
            report["speedup"] = round(baseline["wall_s"] / project["wall_s"], 2)
            comparison = compare(project, baseline)
            report["identical_output"] = comparison.pop("identical_output")
            report["comparison"] = comparison
        if project:
            report["project_stages_s"] = {k: round(v, 3) for k, v in project["stages_s"].items()}
            report["project_run_s"] = round(project["run_s"], 3)
            report["project_import_s"] = round(project["import_s"], 3)
            report["project_checksums"] = project["checksums"]
            report["project_rows"] = project["rows"]
            # the output's bytes, so repeated runs can be compared with each other
            report["project_output_sha256"] = {
                name: hashlib.sha256(Path(project[name]).read_bytes()).hexdigest()
                for name in ("gold", "quarantine")}
        if baseline:
            report["baseline_run_s"] = round(baseline["run_s"], 3)
        if project and results.get("floor"):
            report.update(floor_report(project, results["floor"]))
        report["generated"] = generated
        report["raw_bytes"] = partition_path(raw_dir, DAY).stat().st_size
        return report
    finally:
        warehouses.drop_all()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _spread(values: list[float]) -> list[float]:
    return [min(values), max(values)]


def bench_repeated(rows: int, backend: str, repeat: int, *,
                   sides: tuple[str, ...] = ("project", "floor", "baseline"),
                   baseline_timeout: float | None = None, **kwargs) -> dict:
    """`repeat` paired runs of one size and backend: each pair is the pipeline side, then at
    once the floor side (the same machine state for both halves of a ratio); the baseline
    side runs in the first pair only. The report holds the median of each figure, the
    median of the pairs' ratios with their spread (min, max), and every pair's report
    (`pairs`). `identical_output`: the first pair's comparison with the baseline (when it
    ran) and every pair's gold and quarantine bytes and checksums equal to the first's."""
    pairs = []
    for i in range(repeat):
        pair_sides = sides if i == 0 else tuple(s for s in sides if s != "baseline")
        pairs.append(bench_once(rows, backend, sides=pair_sides,
                                baseline_timeout=baseline_timeout, **kwargs))
    return aggregate(pairs)


def aggregate(pairs: list[dict]) -> dict:
    """One report from paired runs of one size and backend (see `bench_repeated`)."""
    first = pairs[0]
    report = {k: v for k, v in first.items()
              if k in ("rows", "backend", "generated", "raw_bytes", "baseline_s",
                       "baseline_peak_rss_mb", "baseline_run_s", "baseline_timeout_s",
                       "comparison", "project_rows", "project_checksums",
                       "project_output_sha256")}
    report["repeat"] = len(pairs)
    projected = [p for p in pairs if "project_s" in p]
    if projected:
        walls = [p["project_s"] for p in projected]
        report["project_s"] = round(_median(walls), 3)
        report["project_s_spread"] = _spread(walls)
        report["project_s_all"] = walls
        report["project_peak_rss_mb"] = max(p["project_peak_rss_mb"] for p in projected)
        for key in ("project_run_s", "project_import_s"):
            report[key] = round(_median([p[key] for p in projected]), 3)
        stages = projected[0]["project_stages_s"]
        report["project_stages_s"] = {
            k: round(_median([p["project_stages_s"][k] for p in projected]), 3) for k in stages}
        # what a run costs outside its stages: before its run (interpreter start, imports,
        # settings) and inside it (gate, claim, state records, manifest, staging clean-up)
        report["project_fixed_s"] = {
            "before_run": round(_median([p["project_s"] - p["project_run_s"]
                                         for p in projected]), 3),
            "in_run_outside_stages": round(_median(
                [p["project_run_s"] - sum(p["project_stages_s"].values())
                 for p in projected]), 3)}
        same = all(p["project_checksums"] == first["project_checksums"]
                   and p["project_output_sha256"] == first["project_output_sha256"]
                   and p["project_rows"] == first["project_rows"] for p in projected)
        report["identical_across_runs"] = same
        report["identical_output"] = first.get("identical_output", True) and same
    if "baseline_s" in report and "project_s" in report:
        report["speedup"] = round(report["baseline_s"] / report["project_s"], 2)
    floored = [p for p in pairs if p.get("floor_ratio") is not None]
    if floored:
        ratios = [p["floor_ratio"] for p in floored]
        report["floor_s"] = round(_median([p["floor_s"] for p in floored]), 3)
        report["floor_ratio"] = round(_median(ratios), 2)
        report["floor_ratio_spread"] = _spread(ratios)
        report["floor_ratio_all"] = ratios
        report["floor_stages"] = {}
        for stage in FLOOR_STAGES:
            cells = [p["floor_stages"][stage] for p in floored]
            timed = [c for c in cells if c["ratio"] is not None]
            report["floor_stages"][stage] = {
                "pipeline_s": round(_median([c["pipeline_s"] for c in timed]), 3)
                if timed else None,
                "floor_s": round(_median([c["floor_s"] for c in cells]), 3),
                "ratio": round(_median([c["ratio"] for c in timed]), 2) if timed else None,
                "ratio_spread": _spread([c["ratio"] for c in timed]) if timed else None,
            }
        report["floor_checks"] = {
            "same_fact_checksum": all(p["floor_checks"]["same_fact_checksum"] for p in floored),
            "parsed_rows": floored[0]["floor_checks"]["parsed_rows"],
            "loaded_rows": floored[0]["floor_checks"]["loaded_rows"]}
    report["pairs"] = pairs
    return report
