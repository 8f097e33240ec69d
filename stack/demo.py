"""`make demo`: the sample partitions processed through Airflow, on SQLite, without Docker.

1. airflow-init (the compose file's init command) on the embedded target: `airflow db migrate`
   on `airflow_home/airflow.db`, the admin login, the SQLite warehouse's tables;
2. one Airflow run per sample partition (`stack.dagrun`: `dag.test()` with the
   `partition_date` param; done dates are skipped by the watermark gate, so a second
   `make demo` changes nothing);
3. the per-date status table and where the gold files are.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from stack import REPO
from stack.embedded import AIRFLOW_HOME, embedded_target
from stack.local import LocalStack

DAG = "tokokita_orders_daily"


def describe(result: dict) -> str:
    """One line per run: what the gate and the stages did."""
    tasks = result["tasks"]
    if tasks.get("publish_gold") == "success":
        what = "processed, gold published"
    elif tasks.get("wait_for_raw_partition") == "skipped":
        what = "skipped: no partition"
    elif tasks.get("check_watermark") == "skipped":
        what = "skipped: already succeeded (the watermark gate)"
    elif tasks.get("check_watermark") == "failed":
        what = "blocked at max attempts (trigger with reset_attempts after fixing it)"
    else:
        failed = [t for t, s in tasks.items() if s == "failed"]
        what = f"failed in {', '.join(failed) or '?'}"
    return f"  {result['date']}  run {result['state']:<7}  {what}   ({result['run_id']})"


def main() -> int:
    """Init, run every sample date through Airflow, print status and gold files."""
    from tokokita_etl.config import load_settings
    from tokokita_etl.demo import partition_dates
    from tokokita_etl.status import format_status, status_rows

    target = embedded_target()
    stack = LocalStack(target)
    env = stack.env("airflow-scheduler")
    settings = load_settings(env=env, cwd=REPO)
    print(f"Airflow home:  {AIRFLOW_HOME} (metadata: airflow.db, SQLite)")
    print(f"warehouse:     {settings.warehouse_url}")
    print(f"raw:           {settings.raw_dir}\n")

    started = time.monotonic()
    stack.init()
    print(f"[airflow-init] database migrated, login and warehouse ready "
          f"({time.monotonic() - started:.0f}s)")

    dates = [d.isoformat() for d in partition_dates(settings)]
    result_file = AIRFLOW_HOME / "demo-runs.json"
    result_file.unlink(missing_ok=True)
    log_file = AIRFLOW_HOME / "logs" / "demo.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    print(f"Running {DAG} through Airflow for {', '.join(dates)} (task logs: {log_file})")
    started = time.monotonic()
    with open(log_file, "w") as log:
        code = subprocess.run([sys.executable, "-m", "stack.dagrun", str(result_file), *dates],
                              env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                              check=False).returncode
    results = json.loads(result_file.read_text()) if result_file.exists() else []
    for result in results:
        print(describe(result))
    print(f"({time.monotonic() - started:.0f}s)\n")
    if code != 0 or len(results) != len(dates):
        print(log_file.read_text(errors="replace")[-4000:], file=sys.stderr)
        print(f"error: the Airflow runs did not complete (exit {code}); see {log_file}",
              file=sys.stderr)
        return 1

    print(format_status(status_rows(settings)))
    print("\ngold files:")
    for path in sorted(settings.gold_dir.glob("summary_harian_*.csv")):
        print(f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    print("\n`make up` starts the Airflow UI on this same home; `make down` stops it.")
    return 1 if any(r["state"] != "success" for r in results) else 0

if __name__ == "__main__":
    sys.exit(main())
