"""`make demo` and `make up`: the sample week through a running Airflow, on SQLite, no Docker.

0. the warehouse is checked as airflow-init checks it first (`stack.init.warehouse_refusal`):
   when a watermark describes another warehouse, the sample dates are printed as refused,
   with the one line and its remedy, and nothing starts (exit code 2);
1. airflow-init (the compose file's init command) on the embedded target: `airflow db migrate`
   on `airflow_home/airflow.db`, the admin login, the SQLite warehouse's tables, and its
   connection `tokokita_warehouse` in the metadata database (Admin > Connections);
2. api-server, scheduler, dag-processor and triggerer start; the scheduler catches up the
   sample week as ordinary scheduled runs (the runs firing 2026-11-02..08 02:30 WIB, which
   process 2026-11-01..07: three with a partition, four skipped for a missing file);
3. the per-run outcome, the per-date status table and where the gold files are.

`make demo` stops the services afterwards; `make up` leaves them running for the UI. Running
either again creates no run and changes nothing: the week's runs exist and are done.
"""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime
from pathlib import Path

from stack import REPO
from stack.compose import INIT_SERVICE
from stack.embedded import AIRFLOW_HOME, STATE_FILE, embedded_target
from stack.local import LocalStack, stop_procs, write_state
from tokokita_etl.orders.pipeline import ORDERS

DAG_ID = ORDERS.dag_id


def describe(run: dict, tasks: dict[str, dict]) -> str:
    """One line per run: the partition it processed and what the sensor, gate and stages did."""
    states = {task: ti["state"] for task, ti in tasks.items()}
    if states.get("publish_gold") == "success":
        what = "processed, gold published"
    elif states.get("wait_for_raw_partition") == "skipped":
        what = "skipped: no partition"
    elif states.get("check_watermark") == "skipped":
        what = "skipped by the watermark gate (done, or older than the lookback)"
    elif states.get("check_watermark") == "failed":
        what = "blocked at max attempts (trigger with reset_attempts after fixing it)"
    else:
        failed = [t for t, s in states.items() if s == "failed"]
        what = f"failed in {', '.join(failed) or '?'}"
    return f"  {run.get('partition_key') or '?':<10}  run {run['state']:<7}  {what}   " \
           f"({run['dag_run_id']})"


#: the label of every date while the warehouse is refused
REFUSED = "refused"


def status_table(settings, days: list[date], refusal: str | None = None) -> str:
    """The per-date status table `make up` and `make demo` print. While the warehouse is
    refused (`refusal`: `stack.init.warehouse_refusal`'s line) no run proceeds on any date,
    whatever the watermark recorded: every date reads *refused*, and the line follows."""
    from tokokita_etl.runner.schedule import utc_now
    from tokokita_etl.runner.status import date_states, format_status

    rows = date_states(ORDERS, settings, utc_now(), dates=days)
    if refusal is None:
        return format_status(ORDERS, rows)
    rows = [{**row, "state": REFUSED, "label": REFUSED, "warnings": [],
             "error": ""} for row in rows]
    return f"{format_status(ORDERS, rows)}\n\n{REFUSED}: {refusal}"


def sample_dates(settings) -> list[date]:
    """The partitions of the stack's catch-up (`start_date` .. `end_date`) and those the
    watermark holds."""
    from datetime import timedelta

    from tokokita_etl.runner.stores import state_store

    end = settings.catchup_end.date() if settings.catchup_end is not None \
        else settings.start_date
    first = settings.start_date - timedelta(days=1)
    days = {first + timedelta(days=n) for n in range((end - first).days)}
    return sorted(days | {date.fromisoformat(d) for d in state_store(settings).read().runs})


def print_status(settings, days: list[date], refusal: str | None = None) -> None:
    """The state of each date of the sample week and the gold files."""
    print(status_table(settings, days, refusal))
    print("\ngold files:")
    for path in sorted(settings.gold_dir.glob("summary_harian_*.csv")):
        print(f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


def write_stack_settings(env: dict[str, str], root: Path = REPO) -> Path:
    """Write the settings' variables the services get in `env` (those of `settings_variables`)
    to `STACK_SETTINGS_FILE` under the project folder `root`, which the command line run there
    reads: both see one set of settings. Left out: the empty ones (not set) and those that
    are what the compose file gives when no variable is set (its folders and its YAML file
    are the project folder's, which the command line finds there by itself)."""
    from dataclasses import replace

    from stack.compose import settings_variables
    from tokokita_etl.settings.sources import STACK_SETTINGS_FILE

    unset = replace(embedded_target(env={}, api_port=8080, health_port=8974), compose_env={})
    compose_default = LocalStack(unset).env("airflow-scheduler")
    path = root / STACK_SETTINGS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{name}={_quoted(env[name])}" for name in settings_variables()
             if env.get(name) and env[name] != compose_default.get(name)]
    path.write_text("# the local Airflow stack's settings (written by `make up` / `make demo`)\n"
                    + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def _quoted(value: str) -> str:
    """`value` as a dotenv value that reads back as itself (JSON such as `notifiers` has
    quotes and spaces)."""
    if value and all(c.isalnum() or c in "-_./:+@%,=" for c in value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def run_sample_week(*, keep_running: bool, timeout: float = 300) -> int:
    """Start the services, wait for the sample week's scheduled runs, print what they did."""
    from stack.connections import pipeline_settings
    from stack.init import warehouse_refusal
    from stack.rest import AirflowApi, wait_for

    target = embedded_target()
    stack = LocalStack(target, log_dir=AIRFLOW_HOME / "logs" / "stack")
    env = stack.env("airflow-apiserver")
    write_stack_settings(env)
    username = env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(":")[0]
    password = stack.env(INIT_SERVICE).get("_AIRFLOW_WWW_USER_PASSWORD", "")
    print(f"Airflow home {AIRFLOW_HOME} (metadata: airflow.db, SQLite); initialising ...",
          flush=True)
    init_env = stack.env(INIT_SERVICE)
    if (refusal := warehouse_refusal(init_env)) is not None:  # what airflow-init refuses
        settings = pipeline_settings(init_env, cwd=REPO)
        print(status_table(settings, sample_dates(settings), refusal), flush=True)
        print("\nNothing was started.", file=sys.stderr)
        return 2
    stack.init()
    stack.start()
    if keep_running:
        write_state(STATE_FILE, stack)
    print(f"started {', '.join(f'{p.name}={p.pid}' for p in stack.procs)}; logs in "
          f"{stack.log_dir}", flush=True)
    try:
        stack.wait_healthy(timeout=180)
        api = AirflowApi(target.api_url, username, password)
        dag = api.wait_dag(DAG_ID, timeout=120)
        if dag["is_paused"]:
            api.set_paused(DAG_ID, False)
            print(f"unpaused {DAG_ID}")
        print(f"healthy; catching up {env['TOKOKITA_START_DATE']} .. "
              f"{env.get('TOKOKITA_END_DATE') or 'now'} ...", flush=True)

        def caught_up():
            scheduled = [r for r in api.dag_runs(DAG_ID) if r["run_type"] == "scheduled"]
            nxt = api.dag(DAG_ID).get("next_dagrun_run_after")
            finished = all(r["state"] in ("success", "failed") for r in scheduled)
            # caught up: no next run (the catch-up's end) or the next one is in the future
            later = nxt is None or datetime.fromisoformat(nxt.replace("Z", "+00:00")) > \
                datetime.now(UTC)
            return scheduled if scheduled and finished and later else None

        runs = wait_for(caught_up, timeout, 2.0, "the sample week's scheduled runs")
        print(f"caught up: {len(runs)} scheduled runs")
        for run in sorted(runs, key=lambda r: r["run_after"]):
            print(describe(run, api.task_instances(DAG_ID, run["dag_run_id"])))
        api.close()
    except BaseException:
        print(stack.log_tail(), file=sys.stderr)
        stop_procs(stack.procs)
        STATE_FILE.unlink(missing_ok=True)
        raise
    if not keep_running:
        stop_procs(stack.procs)
    print()
    # the connections as airflow-init is given them (the services read them from the metadata
    # database)
    print_status(pipeline_settings(init_env, cwd=REPO),
                 sorted(date.fromisoformat(r["partition_key"]) for r in runs),
                 warehouse_refusal(init_env))
    if keep_running:
        print(f"\nAirflow UI and REST API: {target.api_url}   login: {username} / {password}")
        print(f"DAG: {target.api_url}/dags/{DAG_ID}")
        print("Stop with `make down`.")
    else:
        print("\n`make up` starts the Airflow UI on this same home; `make down` stops it.")
    return 1 if any(r["state"] != "success" for r in runs) else 0


def main() -> int:
    """`make demo`: the sample week through Airflow, then stop."""
    return run_sample_week(keep_running=False)


if __name__ == "__main__":
    sys.exit(main())
