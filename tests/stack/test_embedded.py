"""`make demo` and `make up`/`make down` on a fresh copy of the repository (SQLite, no Docker)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stack import REPO
from stack.ports import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.e2e]  # `make demo` starts a running stack

TRACKED = ("dags", "plugins", "include", "config", "stack", "data/raw", "docker-compose.yaml",
           "pyproject.toml")
SAMPLES = ("2026-11-02", "2026-11-03", "2026-11-04")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """The repository's tracked sources, as a fresh clone has them (no airflow_home, no outputs)."""
    root = tmp_path_factory.mktemp("fresh") / "tokokita"
    for rel in TRACKED:
        source, target = REPO / rel, root / rel
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    return root


def _stack(root: Path, *args: str, timeout: float, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("TOKOKITA_", "AIRFLOW", "_AIRFLOW"))}
    return subprocess.run([sys.executable, "-m", "stack", *args], cwd=root, env={**clean, **env},
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_make_demo_runs_the_sample_week_as_scheduled_runs_and_is_idempotent(fresh):
    first = _stack(fresh, "demo", timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "caught up: 7 scheduled runs" in first.stdout
    for day in SAMPLES:
        assert re.search(rf"{day}\s+run success\s+processed, gold published\s+"
                         rf"\(scheduled__[^_\s]+__{day}__", first.stdout)
        assert re.search(rf"^{day}\s+done\s+1\s", first.stdout, re.M)
        assert f"data/gold/summary_harian_{day}.csv" in first.stdout
        assert (fresh / "data" / "gold" / f"summary_harian_{day}.csv").exists()
    for day in ("2026-11-01", "2026-11-05", "2026-11-06", "2026-11-07"):
        assert re.search(rf"{day}\s+run success\s+skipped: no partition", first.stdout)
    assert (fresh / "airflow_home" / "airflow.db").exists()  # Airflow metadata on SQLite
    assert (fresh / "data" / "warehouse" / "tokokita.db").exists()  # warehouse on SQLite
    manifests = list((fresh / "data" / "state" / "runs").glob("run-*.json"))
    assert {json.loads(p.read_text())["trigger"].split(":")[0] for p in manifests} == {"airflow"}
    assert not (fresh / "airflow_home" / "stack.json").exists()  # the services were stopped

    second = _stack(fresh, "demo", timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "caught up: 7 scheduled runs" in second.stdout  # no new run
    for day in SAMPLES:
        assert re.search(rf"^{day}\s+done\s+1\s", second.stdout, re.M)  # attempt unchanged
    assert len(list((fresh / "data" / "state" / "runs").glob("run-*.json"))) == len(manifests)


def test_make_up_serves_the_ui_caught_up_and_make_down_stops_it(fresh):
    import httpx
    import psutil

    port = free_port()
    pids: list[int] = []
    try:
        # a setting given in the shell, as a user gives it (`TOKOKITA_ON_RAW_CHANGE=reprocess
        # make up`): the services and the command line in the project folder see it alike
        up = _stack(fresh, "up", timeout=420, AIRFLOW_API_PORT=str(port),
                    TOKOKITA_ON_RAW_CHANGE="reprocess")
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"Airflow UI and REST API: http://127.0.0.1:{port}   login: airflow / airflow" \
            in up.stdout
        assert "caught up: 7 scheduled runs" in up.stdout
        state = json.loads((fresh / "airflow_home" / "stack.json").read_text())
        pids = [p["pid"] for p in state["procs"]]
        assert [p["name"] for p in state["procs"]] == [
            "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"]

        base = f"http://127.0.0.1:{port}"
        token = httpx.post(f"{base}/auth/token", json={"username": "airflow",
                                                       "password": "airflow"}).json()
        headers = {"Authorization": f"Bearer {token['access_token']}"}
        dag = httpx.get(f"{base}/api/v2/dags/tokokita_orders_daily", headers=headers).json()
        assert dag["is_paused"] is False
        runs = httpx.get(f"{base}/api/v2/dags/tokokita_orders_daily/dagRuns",
                         params={"limit": 100}, headers=headers).json()["dag_runs"]
        assert runs and all(r["state"] == "success" for r in runs)
        # the warehouse connection is in the metadata database (Admin > Connections), where
        # the tasks read it, with its SQLite conn type; connection testing is enabled (the
        # fields without a port: the UI's Test button sends port 0, which Airflow 3.3.2
        # refuses for a stored connection without one)
        listed = httpx.get(f"{base}/api/v2/connections", headers=headers).json()["connections"]
        warehouse = next(c for c in listed if c["connection_id"] == "tokokita_warehouse")
        assert (warehouse["conn_type"], warehouse["host"]) == (
            "sqlite", str(fresh / "data" / "warehouse" / "tokokita.db"))
        tested = httpx.post(f"{base}/api/v2/connections/test", headers=headers, json={
            "connection_id": "tokokita_warehouse", "conn_type": "sqlite",
            "host": warehouse["host"]}).json()
        assert tested["status"] is True, tested
        assert _stack(fresh, "status", timeout=60).returncode == 0

        # Regression: the stack handed its services four TOKOKITA_* variables, so the sweep
        # never reprocessed what `tokokita-etl status` in the same shell called due
        settings = httpx.get(f"{base}/tokokita/settings.json", headers=headers).json()
        assert {"setting": "on_raw_change", "value": "reprocess",
                "source": "TOKOKITA_ON_RAW_CHANGE"} in settings
        another_shell = subprocess.run(
            [str(Path(sys.executable).parent / "tokokita-etl"), "config", "--json"], cwd=fresh,
            env={k: v for k, v in os.environ.items() if not k.startswith("TOKOKITA_")},
            capture_output=True, text=True, timeout=120, check=False)
        assert another_shell.returncode == 0, another_shell.stderr
        assert {"setting": "on_raw_change", "value": "reprocess",
                "source": f"{fresh / 'airflow_home' / 'tokokita.env'} (TOKOKITA_ON_RAW_CHANGE)"} \
            in json.loads(another_shell.stdout)
    finally:
        down = _stack(fresh, "down", timeout=120)
    assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
    assert not [pid for pid in pids if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert _stack(fresh, "status", timeout=60).returncode == 1
