"""What a year of history costs: a night's run and the looks at the dates' states, after 10 and
after `history` nights, on both state stores.

    python -m bench --history 365 [--history-rows 2000] [--json]

For each store (the file store in `state_dir`, the PostgreSQL store of `state_url`), on an
SQLite warehouse, in this process:

1. nights 1 to 7 run for real (`run_for_date`, as `tokokita-etl run` does, each at its own
   scheduled clock), nights 2 to 7 timed (night 1 creates the warehouse);
2. the ledger of nights 8 to 10 is written directly (`import_entries`, and one manifest per
   date), each entry and manifest night 7's with its own date, and the state so far is
   copied aside (the work folder; the PostgreSQL store's database as a template);
3. the ledger of nights 11 to `history - 6` is written the same way, and the last six nights
   run for real (timed);
4. `tokokita-etl status` and `tokokita-etl due` (each a process of its own, as a person runs
   them), the gate of a scheduled run of a done date (night 7's, the last night's), the
   rows the status page shows (`date_states`) and the sweep's look for changed raw files
   (`propagation.sweep` with `on_raw_change: reprocess`: every done date of the lookback
   compared with its file) are timed on the copy after 10 nights (at the clock of night 11) and on
   the year (at the clock after its last night), alternately, nothing of the watermark held
   in this process from before.

`start_date` is set so that the status window (the lookback plus 30 days) is full after 10
nights already: both looks show as many dates, and only the ledger behind them differs.
Ratios are the year's figure over the 10 nights': the least seconds of the six nights on
each side (and of `repeat` repetitions of each look), as the machine's other work only ever
adds time; `night_median_ratio` gives the medians' ratio beside it.
The last line of `--json` output is one JSON object: per store `night_ratio`,
`status_ratio`, `due_ratio`, `gate_ratio`, `page_ratio`, `sweep_ratio` and the seconds behind
them.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "include") not in sys.path:  # the pipeline of this checkout
    sys.path.insert(0, str(REPO / "include"))

from devtools.samples import generate_partition  # noqa: E402
from tokokita_etl.orders.contract import partition_path  # noqa: E402

OUT = REPO / "bench" / "out"
FIRST = date(2025, 1, 1)
REAL_FIRST, REAL_LAST = 7, 6  # nights run for real at the start and at the end
AFTER_FEW = 10


def _pg_admin(pg_url: str):
    import psycopg

    return psycopg.connect(f"postgresql://{pg_url.split('://', 1)[1]}", autocommit=True,
                           connect_timeout=10)


def _raw_dir(out: Path, rows: int, days: list[date]) -> Path:
    """The raw folder with one generated partition per date (seed: the date's ordinal)."""
    raw = out / "history" / f"raw-{rows}"
    for day in days:
        path = partition_path(raw, day)
        if not path.exists():
            generate_partition(path, day, rows, seed=day.toordinal())
    return raw


def _settings(work: Path, raw: Path, start: date, state_url: str):
    from tokokita_etl.pipelines import load_settings

    return load_settings(env={}, cwd=work, overrides={
        "raw_dir": raw, "gold_dir": work / "gold", "quarantine_dir": work / "quarantine",
        "state_dir": work / "state", "staging_dir": work / "staging",
        "warehouse_url": f"sqlite:///{work / 'warehouse' / 'tokokita.db'}",
        "start_date": start, "state_url": state_url,
    })


def _clock(settings, day: date) -> datetime:
    """The scheduled fire time of `day`'s run (the night after it)."""
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.schedule import fire_time_for_partition

    return fire_time_for_partition(day, settings.cron, settings.timezone, ORDERS.grain)


def _night(settings, day: date) -> float:
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.sequence import run_for_date

    lines: list[str] = []
    clock = _clock(settings, day)
    start = time.perf_counter()
    outcome = run_for_date(ORDERS, settings, day, now=lambda: clock, log=lines.append,
                           emit=lambda _line: None)
    took = time.perf_counter() - start
    if outcome.exit_code != 0:
        raise SystemExit(f"night {day} failed: {outcome.error}\n" + "\n".join(lines))
    return took


def _write_ledger(settings, model_day: date, days: list[date]) -> None:
    """Entries and manifests for `days`, each `model_day`'s with its own date."""
    from tokokita_etl.runner.stores import state_store

    store = state_store(settings)
    model = store.read().entry(model_day)
    manifest = next(store.manifests(model_day))
    old = model_day.isoformat()
    entries = {}
    for day in days:
        new = day.isoformat()
        entries[new] = json.loads(json.dumps(model).replace(old, new))
        body = json.loads(json.dumps(manifest).replace(old, new))
        store.write_manifest(f"run-{new}-023000", body)
    store.import_entries({"pipeline": settings.pipeline, "runs": entries})


def _cli_env(settings) -> dict[str, str]:
    """The environment that gives `tokokita-etl` these settings (no other TOKOKITA_*)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKOKITA_")}
    env.update({f"TOKOKITA_{name.upper()}": str(getattr(settings, name)) for name in (
        "raw_dir", "gold_dir", "quarantine_dir", "state_dir", "staging_dir", "warehouse_url",
        "start_date", "state_url")})
    return env


def _looks(settings, work: Path, day_after: date, done: date) -> dict[str, Callable[[], object]]:
    """`status` and `due` (the commands, each a process of its own), the gate of a scheduled
    run of `done` (a date a real night processed: it skips) and the page's rows (in this
    process) and the sweep's look at the clock after the night of `day_after - 1`."""
    from tokokita_etl.orders.pipeline import ORDERS
    from tokokita_etl.runner.sequence import gate
    from tokokita_etl.runner.status import date_states

    now = _clock(settings, day_after - timedelta(days=1))
    import tokokita_etl

    # the package this process imported (this checkout's, or `--project-src`'s)
    env = {**_cli_env(settings), "PYTHONPATH": str(Path(tokokita_etl.__file__).parents[1])}
    command = [sys.executable, "-m", "tokokita_etl"]
    clock = now.isoformat(timespec="minutes")

    def cli(*args: str) -> None:
        result = subprocess.run([*command, *args, "--now", clock], cwd=work, env=env,
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SystemExit(f"tokokita-etl {' '.join(args)} failed: {result.stderr}")

    looks = {"status": lambda: cli("status"), "due": lambda: cli("due"),
             "gate": lambda: gate(ORDERS, settings, done, force=False, reset_attempts=False,
                                  now=now, by="bench", run_type="scheduled"),
             "page": lambda: date_states(ORDERS, settings, now)}
    try:
        from tokokita_etl.runner.propagation import sweep
    except ImportError:  # `--project-src` of a checkout from before the sweep
        return looks
    # the sweep looks only with `on_raw_change: reprocess` (otherwise it reads nothing)
    reprocess = settings.model_copy(update={"on_raw_change": "reprocess"})
    return {**looks, "sweep": lambda: sweep(ORDERS, reprocess, now)}


def _timed_side_by_side(few: dict, year: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """Each look's least seconds after few nights and after the year, the two alternating
    (so that the machine's other work weighs on both alike), with nothing of the watermark
    held from before (as a process of its own starts)."""
    from tokokita_etl.runner.stores import database, files

    figures = {}
    for name in few:
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(repeat):
            for side, looks in enumerate((few, year)):
                for module in (files, database):  # (an older checkout holds nothing)
                    getattr(module, "_SEEN", {}).clear()
                start = time.perf_counter()
                looks[name]()
                times[side].append(time.perf_counter() - start)
        figures[name] = (min(times[0]), min(times[1]))
    return figures


def _one_store(store: str, history: int, rows: int, out: Path, pg_url: str,
               repeat: int) -> dict:
    from tokokita_etl.orders.settings import OrdersSettings

    days = [FIRST + timedelta(days=n) for n in range(history)]
    raw = _raw_dir(out, rows, days[:REAL_FIRST] + days[-REAL_LAST:])
    work = out / "history" / store
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    defaults = OrdersSettings.model_fields
    window = defaults["lookback_days"].default + 30
    start = FIRST - timedelta(days=window)
    databases: list[str] = []

    def state_url(copy_of: str | None = None) -> str:
        if store != "postgresql":
            return ""
        name = f"tokokita_bench_history_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        with _pg_admin(pg_url) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'
                         + (f' TEMPLATE "{copy_of}"' if copy_of else ""))
        databases.append(name)
        return f"{pg_url.rpartition('/')[0]}/{name}"

    try:
        settings = _settings(work, raw, start, state_url())
        early = [_night(settings, day) for day in days[:REAL_FIRST]][1:]
        _write_ledger(settings, days[REAL_FIRST - 1], days[REAL_FIRST:AFTER_FEW])
        # the state after few nights, kept aside: its looks alternate with the year's
        few_work = out / "history" / f"{store}-after-{AFTER_FEW}"
        shutil.rmtree(few_work, ignore_errors=True)
        shutil.copytree(work, few_work)
        few = _settings(few_work, raw, start,
                        state_url(databases[0]) if databases else "")
        _write_ledger(settings, days[REAL_FIRST - 1], days[AFTER_FEW:history - REAL_LAST])
        late = [_night(settings, day) for day in days[history - REAL_LAST:]]
        looks = _timed_side_by_side(
            _looks(few, few_work, days[AFTER_FEW], days[REAL_FIRST - 1]),
            _looks(settings, work, days[-1] + timedelta(days=1), days[-1]), repeat)
        state_file = settings.state_file
        state_bytes = state_file.stat().st_size if state_file.exists() else None
    finally:
        if databases:
            with _pg_admin(pg_url) as conn:
                for name in databases:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    result = {
        "nights_early_s": [round(t, 4) for t in early],
        "nights_late_s": [round(t, 4) for t in late],
        "night_ratio": round(min(late) / min(early), 3),
        "night_median_ratio": round(statistics.median(late) / statistics.median(early), 3),
        "state_json_bytes": state_bytes,
    }
    for name, (after_few, after_year) in looks.items():
        result[f"{name}_{AFTER_FEW}_s"] = round(after_few, 4)
        result[f"{name}_{history}_s"] = round(after_year, 4)
        result[f"{name}_ratio"] = round(after_year / after_few, 3)
    return result


def bench_history(history: int = 365, rows: int = 2000, *, pg_url: str,
                  out: Path = OUT, repeat: int = 5,
                  stores: tuple[str, ...] = ("files", "postgresql")) -> dict:
    """The history benchmark's figures, per store (see the module's docstring)."""
    if history < AFTER_FEW + REAL_LAST + 1:
        raise SystemExit(f"--history must be at least {AFTER_FEW + REAL_LAST + 1}")
    report: dict = {"history": history, "rows": rows, "repeat": repeat}
    for store in stores:
        report[store] = _one_store(store, history, rows, out, pg_url, repeat)
    return report
