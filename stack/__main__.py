"""`python -m stack up|down|status|demo|env SERVICE`: the embedded stack without Docker.

up      start api-server, scheduler, dag-processor and triggerer (the compose services) on
        airflow_home/ (SQLite), wait until healthy, make sure the DAG is unpaused, wait for
        the sample week's catch-up, print the URL, the login and the per-date status
down    stop what `up` started
status  whether it runs, and where
demo    `make demo` (stack.demo)
env     print the local environment of a compose service (what `up` gives it)
airflow ARGS...  the `airflow` command on the embedded home, with the scheduler's environment,
        e.g. `python -m stack airflow backfill create --dag-id tokokita_orders_daily ...`
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from stack import REPO
from stack.embedded import AIRFLOW_HOME, STATE_FILE, embedded_target
from stack.local import LocalStack, Proc, is_alive, read_state, stop_procs, write_state

DAG_ID = "tokokita_orders_daily"


def _running() -> list[Proc]:
    return [p for p in read_state(STATE_FILE) if is_alive(p)]


def _api_url() -> str | None:
    import json

    try:
        return json.loads(STATE_FILE.read_text())["api_url"]
    except (FileNotFoundError, ValueError, KeyError):
        return None


def _print_status(settings) -> None:
    from tokokita_etl.status import format_status, status_rows

    print(format_status(status_rows(settings)))
    print("\ngold files:")
    for path in sorted(settings.gold_dir.glob("summary_harian_*.csv")):
        print(f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


def _port_of(url: str | None) -> int:
    """The port of a running embedded api-server (8080 when none runs)."""
    return int(url.rsplit(":", 1)[1]) if url else 8080


def up(timeout: float = 300) -> int:
    """Start the stack detached; return once it is healthy and the sample week caught up."""
    from stack.rest import AirflowApi, wait_for
    from tokokita_etl.config import load_settings

    if running := _running():
        print(f"already running ({', '.join(f'{p.name}={p.pid}' for p in running)}): "
              f"{_api_url()}  (`make down` to stop)")
        return 0
    target = embedded_target()
    stack = LocalStack(target, log_dir=AIRFLOW_HOME / "logs" / "stack")
    env = stack.env("airflow-apiserver")
    username = env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(":")[0]
    password = stack.env("airflow-init").get("_AIRFLOW_WWW_USER_PASSWORD", "")
    print(f"Airflow home {AIRFLOW_HOME} (SQLite); initialising ...", flush=True)
    stack.init()
    stack.start()
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
              f"{env['TOKOKITA_END_DATE'] or 'now'} ...", flush=True)

        def caught_up():
            runs = api.dag_runs(DAG_ID)
            scheduled = [r for r in runs if r["run_type"] == "scheduled"]
            nxt = api.dag(DAG_ID).get("next_dagrun_run_after")
            finished = all(r["state"] in ("success", "failed") for r in scheduled)
            # caught up: no next run (end date reached) or the next one is in the future
            later = nxt is None or datetime.fromisoformat(nxt.replace("Z", "+00:00")) > \
                datetime.now(UTC)
            return scheduled and finished and later and len(scheduled)

        count = wait_for(caught_up, timeout, 2.0, "the sample week's scheduled runs")
        api.close()
    except BaseException:
        print(stack.log_tail(), file=sys.stderr)
        stop_procs(stack.procs)
        STATE_FILE.unlink(missing_ok=True)
        raise
    settings = load_settings(env=stack.env("airflow-scheduler"), cwd=REPO)
    print(f"caught up: {count} scheduled runs\n")
    _print_status(settings)
    print(f"\nAirflow UI and REST API: {target.api_url}   login: {username} / {password}")
    print(f"DAG: {target.api_url}/dags/{DAG_ID}")
    print("Stop with `make down`.")
    return 0


def down() -> int:
    """Stop the processes `up` recorded."""
    procs = read_state(STATE_FILE)
    alive = [p for p in procs if is_alive(p)]
    if not alive:
        print("not running")
    else:
        stop_procs(alive)
        print(f"stopped {', '.join(f'{p.name}={p.pid}' for p in alive)}")
    STATE_FILE.unlink(missing_ok=True)
    return 0


def status() -> int:
    """Print whether the embedded stack runs."""
    running = _running()
    if not running:
        print("not running (`make up` starts it)")
        return 1
    print(f"running: {', '.join(f'{p.name}={p.pid}' for p in running)}  {_api_url()}")
    return 0


def main(argv: list[str]) -> int:
    """Dispatch the sub-command."""
    command = argv[0] if argv else "status"
    if command == "up":
        return up()
    if command == "down":
        return down()
    if command == "status":
        return status()
    if command == "demo":
        from stack.demo import main as demo

        return demo()
    if command == "airflow":
        import subprocess

        from stack.local import BIN

        stack = LocalStack(embedded_target(api_port=_port_of(_api_url()), health_port=8974))
        return subprocess.run([str(BIN / "airflow"), *argv[1:]], cwd=REPO, check=False,
                              env=stack.env("airflow-scheduler")).returncode
    if command == "env" and len(argv) == 2:
        stack = LocalStack(embedded_target(api_port=8080, health_port=8974))
        for key, value in sorted(stack.env(argv[1]).items()):
            print(f"{key}={value}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
