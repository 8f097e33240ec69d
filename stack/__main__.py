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

from stack import REPO
from stack.embedded import STATE_FILE, embedded_target
from stack.local import LocalStack, Proc, is_alive, read_state, stop_procs


def _running() -> list[Proc]:
    return [p for p in read_state(STATE_FILE) if is_alive(p)]


def _api_url() -> str | None:
    import json

    try:
        return json.loads(STATE_FILE.read_text())["api_url"]
    except (FileNotFoundError, ValueError, KeyError):
        return None


def _port_of(url: str | None) -> int:
    """The port of a running embedded api-server (8080 when none runs)."""
    return int(url.rsplit(":", 1)[1]) if url else 8080


def up() -> int:
    """Start the stack detached; return once it is healthy and the sample week caught up."""
    from stack.demo import run_sample_week

    if running := _running():
        print(f"already running ({', '.join(f'{p.name}={p.pid}' for p in running)}): "
              f"{_api_url()}  (`make down` to stop)")
        return 0
    return run_sample_week(keep_running=True)


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
    """Print whether the embedded stack runs; a service `up` started that has stopped since
    is named with its log (exit code 1)."""
    recorded = read_state(STATE_FILE)
    running = [p for p in recorded if is_alive(p)]
    if not running:
        print("not running (`make up` starts it)")
        return 1
    print(f"running: {', '.join(f'{p.name}={p.pid}' for p in running)}  {_api_url()}")
    stopped = [p for p in recorded if p not in running]
    for proc in stopped:
        print(f"stopped: {proc.name} (pid {proc.pid}); its log: {proc.log}; `make down` then "
              "`make up` starts the stack again")
    return 1 if stopped else 0


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
