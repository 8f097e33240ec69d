"""A pipeline as a package of its own (`tests/stock_pipeline/`, its `pyproject.toml`
registering it under the entry point group `tokokita_etl.pipelines`): installed into an
environment, the command line runs it and the DAG files build its DAG beside the package's
own, with no edit outside its folder and no `declarations` setting; a process without it
does not know it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.airflow_support import AIRFLOW_ENV, REPO

PACKAGE = REPO / "tests" / "stock_pipeline"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder the stock pipeline's package is installed into (with its entry point's
    metadata), as `pip install --target` does; a process with it on PYTHONPATH has it
    installed. The project's own environment stays without it."""
    site = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    shutil.copytree(PACKAGE, build / "stock_pipeline")  # a build leaves files beside it
    uv = shutil.which("uv")
    command = [uv, "pip", "install", "--python", sys.executable] if uv else \
        [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*command, "--no-deps", "--target", str(site), str(build / "stock_pipeline")],
                   check=True, capture_output=True, text=True)
    assert (site / "stock_pipeline" / "__init__.py").is_file()
    return site


def cli(workspace: Path, *args: str, site: Path | None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("TOKOKITA_", "PYTHONPATH"))}
    env.update({"TOKOKITA_RAW_DIR": str(workspace / "raw"),
                "TOKOKITA_GOLD_DIR": str(workspace / "gold"),
                "TOKOKITA_STATE_DIR": str(workspace / "state"),
                "TOKOKITA_STAGING_DIR": str(workspace / "staging"),
                "TOKOKITA_WAREHOUSE_URL": f"sqlite:///{workspace / 'warehouse.db'}"})
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([str(Path(sys.executable).with_name("tokokita-etl")), *args],
                          cwd=workspace, env=env, capture_output=True, text=True, check=False)


def test_an_installed_pipeline_package_runs_from_the_command_line_by_its_name(site, tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "stok_2026-11-02.csv").write_text("sku,qty\nB-2,3\nA-1,4\nB-2,1\n",
                                                          encoding="utf-8")
    ran = cli(tmp_path, "run", "--pipeline", "stock", "--date", "2026-11-02", site=site)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (tmp_path / "gold" / "stok_harian_2026-11-02.csv").read_text(encoding="utf-8") == \
        "sku,qty\nA-1,4\nB-2,4\n"
    status = cli(tmp_path, "status", "--pipeline", "stock", "--json", "--now",
                 "2026-11-03T12:00:00+07:00", site=site)
    assert status.returncode == 0, status.stderr
    row = next(row for row in json.loads(status.stdout) if row["date"] == "2026-11-02")
    assert row["state"] == "done"
    config = cli(tmp_path, "config", "--pipeline", "stock", "--json", site=site)
    assert config.returncode == 0, config.stderr
    settings = {row["setting"]: row for row in json.loads(config.stdout)}
    assert (settings["cron"]["value"], settings["pipeline"]["value"]) == ("0 3 * * *", "stock")
    # the state is its own, in the folder of its name
    assert (tmp_path / "state" / "stock" / "state.json").is_file()

    without = cli(tmp_path, "status", "--pipeline", "stock", site=None)
    assert without.returncode == 2
    assert "unknown pipeline 'stock'; pipelines: monthly_city_report, orders, " \
        "weekly_city_report" in without.stderr


def test_the_dag_files_build_an_installed_pipelines_dag_beside_the_package_own(site, tmp_path):
    probe = f"""
import json, sys
sys.path[:0] = [{str(REPO / 'plugins')!r}, {str(REPO / 'include')!r}]
from airflow.dag_processing.dagbag import DagBag
bag = DagBag({str(REPO / 'dags')!r})
print(json.dumps({{"errors": sorted(bag.import_errors), "dags": sorted(bag.dag_ids),
                   "stock": [t.task_id for t in bag.dags["tokokita_stock_daily"].topological_sort()]
                   if "tokokita_stock_daily" in bag.dags else None}}))
"""
    env = {**AIRFLOW_ENV, "PATH": "/usr/bin:/bin", "TOKOKITA_HOME": str(tmp_path),
           "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env=env)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["errors"] == []
    assert found["dags"] == ["tokokita_monthly_city_report", "tokokita_orders_daily",
                             "tokokita_stock_daily", "tokokita_sweep",
                             "tokokita_weekly_city_report"]
    assert found["stock"] == ["wait_for_raw_partition", "check_watermark", "count", "publish"]
