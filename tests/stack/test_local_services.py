"""The compose services as local processes: the same commands and environment, few local values."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from stack import REPO
from stack.compose import AIRFLOW_SERVICES, INIT_SERVICE
from stack.local import LocalStack, LocalTarget, healthcheck_argv, service_argv, service_env

BIN = Path(sys.executable).parent


def _target(tmp_path: Path, **kw) -> LocalTarget:
    return LocalTarget(
        airflow_home=tmp_path / "home",
        databases={"airflow": "postgresql+psycopg://postgres@127.0.0.1:5432/airflow_e2e_x",
                   "tokokita": "postgresql+psycopg://postgres@127.0.0.1:5432/tokokita_e2e_x"},
        api_port=18123, scheduler_health_port=18974, **kw)


def test_commands_follow_the_image_entrypoint(tmp_path):
    stack = LocalStack(_target(tmp_path))
    assert stack.argv("airflow-apiserver") == [str(BIN / "airflow"), "api-server"]
    assert stack.argv("airflow-scheduler") == [str(BIN / "airflow"), "scheduler"]
    assert stack.argv("airflow-dag-processor") == [str(BIN / "airflow"), "dag-processor"]
    assert stack.argv("airflow-triggerer") == [str(BIN / "airflow"), "triggerer"]
    assert stack.argv(INIT_SERVICE) == [sys.executable, "-m", "stack.init"]
    assert service_argv(stack.services["airflow-cli"]) == ["/bin/bash", "-c", "airflow"]


def test_local_environment_is_the_compose_environment_with_only_the_documented_changes(tmp_path):
    target = _target(tmp_path)
    stack = LocalStack(target)
    for name in (*AIRFLOW_SERVICES, INIT_SERVICE):
        compose_env = stack.services[name].environment
        local = service_env(stack.services[name], target)
        # documented: an empty TOKOKITA_* variable (a setting nobody gave) is left out
        unset = {key for key, value in compose_env.items()
                 if key.startswith("TOKOKITA_") and not value}
        assert "TOKOKITA_ON_RAW_CHANGE" in unset and not unset & set(local)
        compose_env = {key: value for key, value in compose_env.items() if key not in unset}
        assert set(compose_env) <= set(local)
        for key, value in compose_env.items():
            if "/opt/airflow" in value or "postgres:" in value or "@postgres" in value \
                    or "airflow-apiserver:8080" in value or key == "AIRFLOW_UID":
                continue
            assert local[key] == value, (name, key)  # everything else verbatim
        added = set(local) - set(compose_env)
        assert added <= {"AIRFLOW_HOME", "AIRFLOW__API__HOST", "AIRFLOW__API__PORT",
                         "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST",
                         "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT", "PATH", "HOME",
                         "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "USER", "LOGNAME", "TERM"}, added


def test_substituted_values(tmp_path):
    target = _target(tmp_path, mounts={"/opt/airflow/data": tmp_path / "data"})
    env = LocalStack(target).env("airflow-scheduler")
    home = str(tmp_path / "home")
    assert env["AIRFLOW_HOME"] == home
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(REPO / "dags")
    assert env["AIRFLOW__CORE__PLUGINS_FOLDER"] == str(REPO / "plugins")
    assert env["PYTHONPATH"] == str(REPO / "include")
    assert env["TOKOKITA_CONFIG"] == str(REPO / "config" / "pipeline.yaml")
    assert env["TOKOKITA_RAW_DIR"] == str(tmp_path / "data" / "raw")
    assert env["AIRFLOW__LOGGING__BASE_LOG_FOLDER"] == f"{home}/logs"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] == f"{home}/auth/passwords.json"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == \
        "postgresql+psycopg://postgres@127.0.0.1:5432/airflow_e2e_x"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"] == \
        "postgresql+psycopg_async://postgres@127.0.0.1:5432/airflow_e2e_x"
    assert "TOKOKITA_WAREHOUSE_URL" not in env
    assert env["AIRFLOW_CONN_TOKOKITA_WAREHOUSE"] == \
        "postgresql://postgres@127.0.0.1:5432/tokokita_e2e_x"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:18123/execution/"
    assert env["AIRFLOW__API__PORT"] == "18123"
    assert env["PATH"].split(os.pathsep)[0] == str(BIN)
    assert LocalStack(target).env(INIT_SERVICE)["AIRFLOW_UID"] == str(os.getuid())


def test_sqlite_target_keeps_each_driver_on_sqlite(tmp_path):
    target = LocalTarget(airflow_home=tmp_path, api_port=1, scheduler_health_port=2,
                         databases={"airflow": f"sqlite:///{tmp_path}/airflow.db",
                                    "tokokita": f"sqlite:///{tmp_path}/w.db"})
    env = LocalStack(target).env("airflow-scheduler")
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{tmp_path}/airflow.db"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"] == \
        f"sqlite+aiosqlite:///{tmp_path}/airflow.db"
    assert json.loads(env["AIRFLOW_CONN_TOKOKITA_WAREHOUSE"]) == {
        "conn_type": "sqlite", "host": f"{tmp_path}/w.db"}


def test_the_object_store_connection_points_at_the_local_object_store(tmp_path):
    """The endpoint sits %-quoted in the AIRFLOW_CONN_AWS_DEFAULT URI's query."""
    from stack.connections import storage_options

    target = _target(tmp_path, hosts={"object-store:5000": "127.0.0.1:19000"})
    env = LocalStack(target).env("airflow-triggerer")
    assert storage_options(env)["endpoint_url"] == "http://127.0.0.1:19000"


def test_the_embedded_stack_gives_its_connections_to_airflow_init_alone(tmp_path):
    """The Airflow services get the AIRFLOW_CONN_* variables empty, so that Airflow reads the
    connections from its metadata database (where airflow-init adds them) and the UI's edits
    are what the tasks read; the connection form's Test button is enabled."""
    from stack.connections import ADD_CONNECTIONS_VAR
    from stack.embedded import embedded_target

    stack = LocalStack(embedded_target(api_port=8080, health_port=8974))
    init = stack.env(INIT_SERVICE)
    assert init[ADD_CONNECTIONS_VAR] == "true"
    assert json.loads(init["AIRFLOW_CONN_TOKOKITA_WAREHOUSE"]) == {
        "conn_type": "sqlite", "host": str(REPO / "data" / "warehouse" / "tokokita.db")}
    assert init["AIRFLOW_CONN_AWS_DEFAULT"]
    for name in AIRFLOW_SERVICES:
        env = stack.env(name)
        assert ADD_CONNECTIONS_VAR not in env, name
        conns = {key: value for key, value in env.items() if key.startswith("AIRFLOW_CONN_")}
        assert conns == {"AIRFLOW_CONN_TOKOKITA_WAREHOUSE": "", "AIRFLOW_CONN_AWS_DEFAULT": ""}
        assert env["AIRFLOW__CORE__TEST_CONNECTION"] == "Enabled", name


def test_the_compose_stack_keeps_its_connections_as_variables_and_testing_disabled(tmp_path):
    stack = LocalStack(_target(tmp_path))
    for name in AIRFLOW_SERVICES:
        env = stack.env(name)
        assert env["AIRFLOW_CONN_TOKOKITA_WAREHOUSE"].startswith("postgresql://"), name
        assert env["AIRFLOW__CORE__TEST_CONNECTION"] == "Disabled", name
    with pytest.raises(ValueError, match="connections must be"):
        _target(tmp_path, connections="vault")


def test_healthchecks_as_local_commands(tmp_path):
    target = _target(tmp_path)
    stack = LocalStack(target)
    assert healthcheck_argv(stack.services["airflow-apiserver"], target) == [
        "curl", "--fail", "http://127.0.0.1:18123/api/v2/monitor/health"]
    assert healthcheck_argv(stack.services["airflow-scheduler"], target) == [
        "curl", "--fail", "http://127.0.0.1:18974/health"]
    assert healthcheck_argv(stack.services["airflow-triggerer"], target) == [
        "/bin/sh", "-c", "airflow jobs check --job-type TriggererJob --local"]


def test_init_service_on_sqlite_is_idempotent(tmp_path):
    """airflow-init's command, as a local process: migrate, login file, warehouse tables."""
    target = LocalTarget(
        airflow_home=tmp_path / "home", api_port=1, scheduler_health_port=2,
        databases={"airflow": f"sqlite:///{tmp_path}/home/airflow.db",
                   "tokokita": f"sqlite:///{tmp_path}/data/warehouse/tokokita.db"},
        mounts={"/opt/airflow/data": tmp_path / "data"},
        compose_env={"_AIRFLOW_WWW_USER_PASSWORD": "s3cret"})
    stack = LocalStack(target)
    first = stack.init()
    assert "airflow db migrate" in first.stdout
    assert "login 'airflow' written" in first.stdout
    passwords = json.loads((tmp_path / "home" / "auth" / "passwords.json").read_text())
    assert passwords == {"airflow": "s3cret"}
    assert (tmp_path / "home" / "airflow.db").exists()
    for folder in ("raw", "gold", "quarantine", "state", "staging"):
        assert (tmp_path / "data" / folder).is_dir()
    import sqlite3

    with sqlite3.connect(tmp_path / "data" / "warehouse" / "tokokita.db") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"fact_pesanan", "summary_harian", "karantina"} <= tables
    second = stack.init()  # again: nothing breaks, nothing is lost
    assert "done" in second.stdout
    assert json.loads((tmp_path / "home" / "auth" / "passwords.json").read_text()) == passwords


def _airflow(env: dict[str, str], *args: str) -> str:
    import subprocess

    result = subprocess.run([str(BIN / "airflow"), *args], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_init_adds_the_connections_to_the_metadata_database_once_and_keeps_an_edit(tmp_path):
    """airflow-init of a "metadata" target: the services' Airflow (whose AIRFLOW_CONN_* are
    empty) finds the connections in its metadata database, with their conn types; a second
    init keeps a connection edited there (as Admin > Connections would) as it is."""
    warehouse = tmp_path / "data" / "warehouse" / "tokokita.db"
    target = LocalTarget(
        airflow_home=tmp_path / "home", api_port=1, scheduler_health_port=2,
        databases={"airflow": f"sqlite:///{tmp_path}/home/airflow.db",
                   "tokokita": f"sqlite:///{warehouse}"},
        mounts={"/opt/airflow/data": tmp_path / "data"}, connections="metadata")
    stack = LocalStack(target)
    first = stack.init()
    assert "connection 'tokokita_warehouse' (conn type sqlite) added" in first.stdout
    assert "connection 'aws_default' (conn type aws) added" in first.stdout
    env = stack.env("airflow-scheduler")
    listed = json.loads(_airflow(env, "connections", "list", "-o", "json"))
    assert {c["conn_id"]: c["conn_type"] for c in listed} == {"tokokita_warehouse": "sqlite",
                                                             "aws_default": "aws"}
    made = json.loads(_airflow(env, "connections", "get", "tokokita_warehouse", "-o", "json"))
    assert made[0]["host"] == str(warehouse)
    # edited as a person would in the UI (delete and add is the CLI's edit)
    _airflow(env, "connections", "delete", "tokokita_warehouse")
    _airflow(env, "connections", "add", "tokokita_warehouse", "--conn-type", "sqlite",
             "--conn-host", str(tmp_path / "other.db"))
    second = stack.init()
    assert "connection 'tokokita_warehouse' is in the metadata database already: kept as it " \
        "is" in second.stdout
    kept = json.loads(_airflow(env, "connections", "get", "tokokita_warehouse", "-o", "json"))
    assert kept[0]["host"] == str(tmp_path / "other.db")


@pytest.mark.postgres
def test_init_creates_the_warehouse_database_on_postgresql(tmp_path):
    import uuid

    import psycopg

    from stack.ephemeral import admin_conninfo, db_url
    from stack.init import prepare_warehouse

    name = f"tokokita_e2e_{uuid.uuid4().hex[:10]}"
    url = db_url(name)
    try:
        # the warehouse connection as the compose file gives it (URI form)
        env = {"AIRFLOW_CONN_TOKOKITA_WAREHOUSE": url.replace("postgresql+psycopg", "postgresql")}
        assert prepare_warehouse(env) is not None
        assert prepare_warehouse(env) is not None  # idempotent
        with psycopg.connect(url.replace("+psycopg", "")) as conn:
            tables = {r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        assert {"fact_pesanan", "summary_harian", "karantina"} <= tables
    finally:
        with psycopg.connect(admin_conninfo(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_stack_status_names_a_service_that_stopped_with_its_log(tmp_path, monkeypatch, capsys):
    """Bug: when one service of `make up` died (a scheduler that crashed), `python -m stack
    status` listed the others as running and said nothing of it (exit 0)."""
    import subprocess

    import psutil

    import stack.__main__ as stack_main

    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    try:
        procs = [{"name": name, "pid": proc.pid, "log": str(tmp_path / f"{name}.log"),
                  "create_time": psutil.Process(alive.pid).create_time() if proc is alive
                  else 0.0}
                 for name, proc in (("airflow-apiserver", alive), ("airflow-scheduler", ended))]
        state = tmp_path / "stack.json"
        state.write_text(json.dumps({"procs": procs, "api_url": "http://127.0.0.1:8080"}))
        monkeypatch.setattr(stack_main, "STATE_FILE", state)
        assert stack_main.status() == 1
        out = capsys.readouterr().out
        assert out.startswith(f"running: airflow-apiserver={alive.pid}  http://127.0.0.1:8080\n")
        assert (f"stopped: airflow-scheduler (pid {ended.pid}); its log: "
                f"{tmp_path / 'airflow-scheduler.log'}") in out
    finally:
        alive.kill()
        alive.wait()
