"""docker-compose.yaml: valid for Compose, complete, and one environment for every service."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from stack import COMPOSE_FILE, REPO
from stack.compose import AIRFLOW_SERVICES, ComposeError, interpolate, load, service, services

DOCKER_COMPOSE = shutil.which("docker-compose")
DEFAULTS = services()  # no variable set: every default written in the file


def _compose_config(*args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([DOCKER_COMPOSE, "-f", str(COMPOSE_FILE), *args, "config"],
                            capture_output=True, text=True, timeout=60, check=False,
                            cwd=REPO, env={"PATH": "/usr/bin:/bin", **(env or {})})
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.skipif(not DOCKER_COMPOSE, reason="docker-compose is not installed "
                    "(apt-get install -y docker-compose); the structural tests still run")
def test_docker_compose_validates_the_file_offline():
    resolved = yaml.safe_load(_compose_config())
    assert set(AIRFLOW_SERVICES) | {"postgres", "airflow-init"} <= set(resolved["services"])
    scheduler = resolved["services"]["airflow-scheduler"]["environment"]
    assert scheduler["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"


@pytest.mark.skipif(not DOCKER_COMPOSE, reason="docker-compose is not installed")
def test_docker_compose_celery_profile_switches_every_service_to_celery():
    resolved = yaml.safe_load(_compose_config(
        "--profile", "celery", env={"AIRFLOW__CORE__EXECUTOR": "CeleryExecutor"}))
    for name in (*AIRFLOW_SERVICES, "airflow-worker", "airflow-worker-2"):
        assert resolved["services"][name]["environment"]["AIRFLOW__CORE__EXECUTOR"] == \
            "CeleryExecutor", name
    assert {"redis", "object-store"} <= set(resolved["services"])


@pytest.mark.skipif(not DOCKER_COMPOSE, reason="docker-compose is not installed")
def test_the_scale_out_env_file_puts_state_in_postgresql_and_data_in_the_object_store():
    resolved = yaml.safe_load(_compose_config("--env-file", str(REPO / "config" / "scale-out.env")))
    assert {"redis", "object-store", "airflow-worker", "airflow-worker-2"} <= \
        set(resolved["services"])
    for name in (*AIRFLOW_SERVICES, "airflow-worker", "airflow-worker-2"):
        env = resolved["services"][name]["environment"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name
        assert env["TOKOKITA_STATE_URL"] == "warehouse", name
        for folder in ("RAW", "STAGING", "GOLD", "QUARANTINE"):
            assert env[f"TOKOKITA_{folder}_DIR"].startswith("s3://tokokita/"), (name, folder)
        assert "endpoint_url=http%3A%2F%2Fobject-store%3A5000" in env["AIRFLOW_CONN_AWS_DEFAULT"]
        assert not [var for var in env if var.startswith("AWS_")], name


def test_file_has_no_compose_v2_only_keys():
    doc = yaml.safe_load(COMPOSE_FILE.read_text())
    assert "name" not in doc  # docker-compose 1.x rejects a top-level `name:`
    assert "version" not in doc  # obsolete in the Compose specification


def test_services_and_profiles():
    assert {"postgres", "airflow-init", *AIRFLOW_SERVICES} <= set(DEFAULTS)
    for name in ("postgres", "airflow-init", *AIRFLOW_SERVICES):
        assert DEFAULTS[name].profiles == [], name  # the default stack
    assert DEFAULTS["redis"].profiles == ["celery"]
    assert DEFAULTS["airflow-worker"].profiles == ["celery"]
    assert DEFAULTS["object-store"].profiles == ["celery"]
    assert DEFAULTS["airflow-worker-2"].profiles == ["celery"]
    assert DEFAULTS["airflow-worker"].command == ["celery", "worker", "--celery-hostname",
                                                  "worker-1@%h"]
    assert DEFAULTS["airflow-worker-2"].command == ["celery", "worker", "--celery-hostname",
                                                    "worker-2@%h"]


def test_workers_mount_only_the_code_and_keep_a_working_copy_of_their_own():
    for name in ("airflow-worker", "airflow-worker-2"):
        worker = DEFAULTS[name]
        assert sorted(v.target for v in worker.volumes) == [
            f"/opt/airflow/{folder}" for folder in ("config", "dags", "include", "plugins")]
        assert worker.environment["TOKOKITA_WORK_DIR"] == "/opt/airflow/work"


def test_every_long_running_service_has_a_healthcheck():
    checks = {name: " ".join(s.healthcheck or []) for name, s in DEFAULTS.items()}
    assert "http://localhost:8080/api/v2/monitor/health" in checks["airflow-apiserver"]
    assert "http://localhost:8974/health" in checks["airflow-scheduler"]
    assert "airflow jobs check --job-type DagProcessorJob" in checks["airflow-dag-processor"]
    assert "airflow jobs check --job-type TriggererJob" in checks["airflow-triggerer"]
    assert "pg_isready" in checks["postgres"]
    assert "redis-cli ping" in checks["redis"]
    assert "inspect ping" in checks["airflow-worker"]
    assert 'worker-2@' in checks["airflow-worker-2"]
    assert "moto-api" in checks["object-store"]
    assert DEFAULTS["airflow-scheduler"].environment["AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK"] \
        == "true"


def test_start_order_init_first_then_the_airflow_services():
    doc = load()
    init = doc["services"]["airflow-init"]
    assert init["command"] == ["python", "-m", "stack.init"]
    assert init["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in AIRFLOW_SERVICES:
        depends = doc["services"][name]["depends_on"]
        assert depends["airflow-init"]["condition"] == "service_completed_successfully", name
        assert depends["postgres"]["condition"] == "service_healthy", name
    assert [s.command for s in map(DEFAULTS.get, AIRFLOW_SERVICES)] == [
        ["api-server"], ["scheduler"], ["dag-processor"], ["triggerer"]]
    assert DEFAULTS["airflow-apiserver"].ports == ["8080:8080"]


#: the scheduler's own settings: the LocalExecutor's forkserver and its idle sleep
SCHEDULER_ONLY = {"AIRFLOW__SCHEDULER__MP_START_METHOD",
                  "AIRFLOW__SCHEDULER__MP_FORKSERVER_PRELOAD",
                  "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"}


def test_one_environment_shared_by_all_airflow_services():
    common = DEFAULTS["airflow-apiserver"].environment
    for name in (*AIRFLOW_SERVICES, "airflow-init", "airflow-worker", "airflow-worker-2"):
        env = DEFAULTS[name].environment
        extra = set(env) - set(common)
        own = {"TOKOKITA_WORK_DIR"} if name.startswith("airflow-worker") else set()
        assert {k: env[k] for k in common if k not in own} == \
            {k: v for k, v in common.items() if k not in own}, name
        allowed = {"AIRFLOW_UID", "_AIRFLOW_WWW_USER_USERNAME", "_AIRFLOW_WWW_USER_PASSWORD",
                   "DUMB_INIT_SETSID"} | (SCHEDULER_ONLY if name == "airflow-scheduler" else set())
        assert extra <= allowed, (name, extra)


def test_every_module_the_scheduler_preloads_imports(tmp_path):
    """The forkserver skips a preload module that fails to import without a word: a renamed
    module would silently bring the per-task imports back."""
    env = DEFAULTS["airflow-scheduler"].environment
    assert env["AIRFLOW__SCHEDULER__MP_START_METHOD"] == "forkserver"
    modules = [m.strip() for m in env["AIRFLOW__SCHEDULER__MP_FORKSERVER_PRELOAD"].split(",")]
    assert "tokokita_etl.orders.transform" in modules and "tokokita_airflow.operators" in modules
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
    done = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(REPO / "include"), str(REPO / "plugins")]),
                               "AIRFLOW_HOME": str(tmp_path)},
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_shared_jwt_secret_and_a_valid_fernet_key():
    from cryptography.fernet import Fernet

    env = DEFAULTS["airflow-apiserver"].environment
    assert len(env["AIRFLOW__API_AUTH__JWT_SECRET"]) >= 32
    Fernet(env["AIRFLOW__CORE__FERNET_KEY"].encode())  # raises when malformed
    custom = services(env={"AIRFLOW__API_AUTH__JWT_SECRET": "s" * 40,
                           "AIRFLOW__CORE__FERNET_KEY": "k"})
    assert {custom[n].environment["AIRFLOW__API_AUTH__JWT_SECRET"] for n in AIRFLOW_SERVICES} \
        == {"s" * 40}


def test_project_settings_mounts_and_image():
    scheduler = DEFAULTS["airflow-scheduler"]
    env = scheduler.environment
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "false"
    assert env["PYTHONPATH"].split(":")[0] == "/opt/airflow/include"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
    mounts = {v.target: v.source for v in scheduler.volumes}
    for folder in ("dags", "plugins", "include", "data", "config"):
        assert mounts[f"/opt/airflow/{folder}"] == str(REPO / folder), folder
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/airflow/dags"
    assert env["TOKOKITA_RAW_DIR"] == "/opt/airflow/data/raw"
    assert scheduler.user == "50000:0"
    assert services(env={"AIRFLOW_UID": "1234"})["airflow-scheduler"].user == "1234:0"
    assert DEFAULTS["airflow-init"].user == "0:0"
    doc = load()
    assert doc["services"]["airflow-scheduler"]["build"]["context"] == "."
    assert "_PIP_ADDITIONAL_REQUIREMENTS" not in COMPOSE_FILE.read_text().replace(
        "# _PIP", "")  # nothing is installed at container start


def test_the_services_get_the_warehouse_and_object_store_as_airflow_connections_only():
    from sqlalchemy.engine import make_url

    from stack.connections import parse, storage_options, warehouse_url

    for name in (*AIRFLOW_SERVICES, "airflow-init", "airflow-worker", "airflow-worker-2"):
        env = DEFAULTS[name].environment
        # the generated block gives it empty unless set, and empty means not set
        assert not env.get("TOKOKITA_WAREHOUSE_URL"), name
        assert not [var for var in env if var.startswith("AWS_")], name
    env = DEFAULTS["airflow-scheduler"].environment
    assert parse("tokokita_warehouse", env["AIRFLOW_CONN_TOKOKITA_WAREHOUSE"]).conn_type == \
        "postgres"
    url = make_url(warehouse_url(env))
    assert (url.drivername, url.host, url.port, url.database, url.username) == \
        ("postgresql+psycopg", "postgres", 5432, "tokokita", "airflow")
    assert storage_options(env) == {
        "key": "tokokita", "secret": "tokokita-local-secret",
        "endpoint_url": "http://object-store:5000", "config_kwargs": {"region_name": "us-east-1"}}
    metadata = make_url(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    assert metadata.database == "airflow" and metadata.database != url.database


def test_dockerfile_builds_from_the_pinned_airflow_and_installs_requirements():
    dockerfile = (REPO / "Dockerfile").read_text()
    pinned = re.search(r"^apache-airflow==(\S+)$", (REPO / "requirements-runtime.txt").read_text(),
                       re.M)
    assert f"apache/airflow:{pinned.group(1)}-python3.11" in dockerfile
    build_args = load()["x-airflow-common"]["build"]["args"]
    assert build_args["AIRFLOW_BASE_IMAGE"] == f"apache/airflow:{pinned.group(1)}-python3.11"
    assert "-r /tmp/tokokita/requirements-runtime.txt" in dockerfile
    assert "-c /tmp/tokokita/constraints.txt" in dockerfile
    assert "pip-check.sh compare" in dockerfile
    assert "COPY --chown=airflow:0 stack/ /opt/airflow/stack/" in dockerfile
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {"!requirements-runtime.txt", "!constraints.txt", "!stack/"} <= set(ignored)


def test_the_test_tools_are_outside_the_runtime_requirements():
    """Regression: the Dockerfile filtered test tools out of requirements.txt by name and
    missed playwright and moto[server]; the image now reads only requirements-runtime.txt."""
    lines = [line.strip() for line in (REPO / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0] == "-r requirements-runtime.txt"
    runtime = {re.split(r"[\[=]", line)[0].lower() for line in
               (REPO / "requirements-runtime.txt").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    tools = {re.split(r"[\[=]", line)[0].lower() for line in lines[1:]}
    assert {"pytest", "playwright", "moto", "ruff"} <= tools
    assert runtime.isdisjoint(tools)
    instructions = "\n".join(line for line in (REPO / "Dockerfile").read_text().splitlines()
                             if not line.lstrip().startswith("#"))
    assert "requirements.txt" not in instructions.replace("requirements-runtime.txt", "")
    assert "!requirements.txt" not in (REPO / ".dockerignore").read_text().split()


@pytest.mark.parametrize(("text", "env", "expected"), [
    ("${A:-x}", {}, "x"), ("${A:-x}", {"A": ""}, "x"), ("${A-x}", {"A": ""}, ""),
    ("${A-x}", {}, "x"), ("$A/${B}", {"A": "1", "B": "2"}, "1/2"), ("$${HOSTNAME}", {}, "${HOSTNAME}"),
    ("${A:-${B:-z}}", {}, "z"), ("plain", {}, "plain"),
])
def test_interpolation_follows_compose(text, env, expected):
    assert interpolate(text, env) == expected


def test_interpolation_required_variable():
    with pytest.raises(ComposeError, match="required variable A"):
        interpolate("${A:?set A}", {})


def test_unknown_service_is_an_error():
    with pytest.raises(ComposeError, match="no service"):
        service(load(), "nope")


# -- the settings' variables: one generated block, every setting of the model ------------------

def _settings_variables() -> dict[str, str]:
    """Every variable of the models, enumerated from them here (not from the helper that
    writes the block): the YAML file's, each shared setting's, the orders' older top-level
    names, each field of each package pipeline's section."""
    from tokokita_etl.pipelines import DEFAULT, PIPELINES
    from tokokita_etl.settings.model import (
        SHARED_SETTINGS,
        WATERMARK_NAME,
        env_var,
        pipeline_env_var,
    )

    found = {"TOKOKITA_CONFIG": "config", **{env_var(name): name for name in SHARED_SETTINGS}}
    for pipeline, declaration in PIPELINES.items():
        fields = [name for name in declaration.settings.model_fields
                  if name not in SHARED_SETTINGS]
        if pipeline == DEFAULT:
            found.update({env_var(name): f"{pipeline}.{name}" for name in fields})
        found.update({pipeline_env_var(pipeline, name): f"{pipeline}.{name}"
                      for name in fields if name != WATERMARK_NAME})
    return found


def test_the_compose_files_settings_block_is_up_to_date_with_the_settings_model():
    """Regression: the compose file named its own list of TOKOKITA_* variables, so a setting
    set in the shell (TOKOKITA_ON_RAW_CHANGE=reprocess) reached the command line and no
    service. The block is generated from the model; out of date, this says how to rewrite it."""
    from stack.compose import settings_block

    text = COMPOSE_FILE.read_text(encoding="utf-8")
    assert settings_block(text) == text, \
        "docker-compose.yaml's settings block is out of date: run `.venv/bin/python -m stack.compose`"
    done = subprocess.run([sys.executable, "-m", "stack.compose", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_the_block_rewrite_keeps_the_files_defaults_and_adds_a_missing_setting():
    from stack.compose import BLOCK_BEGIN, BLOCK_END, settings_block

    text = COMPOSE_FILE.read_text(encoding="utf-8")
    stale = text.replace("    TOKOKITA_ON_RAW_CHANGE: ${TOKOKITA_ON_RAW_CHANGE:-}\n", "")
    assert stale != text and settings_block(stale) == text
    assert BLOCK_BEGIN in text and BLOCK_END in text
    with pytest.raises(ComposeError, match="no block of the settings' variables"):
        settings_block(text.replace(BLOCK_BEGIN, "    # something else"))


@pytest.mark.parametrize("service_name", [*AIRFLOW_SERVICES, "airflow-init", "airflow-worker",
                                          "airflow-worker-2"])
def test_every_setting_of_every_package_pipeline_has_a_variable_in_every_airflow_service(
        service_name):
    variables = _settings_variables()
    assert "TOKOKITA_ON_RAW_CHANGE" in variables
    # the weekly report reads no raw file: its class has no on_raw_change (the orders' has)
    assert "TOKOKITA_ORDERS__ON_RAW_CHANGE" in variables
    assert "TOKOKITA_WEEKLY_CITY_REPORT__WAIT_WINDOW_HOURS" in variables
    given = {var: f"given-{index}" for index, var in enumerate(variables)}
    env = services(env=given)[service_name].environment
    assert {var: env.get(var) for var in variables} == given


def test_no_variable_set_gives_the_settings_nothing_but_the_container_paths():
    """Empty means not set (`load_settings` skips an empty variable): without any variable
    the services' settings are config/pipeline.yaml's and the defaults, but for the folders
    and the YAML file's path, which are the container's (the compose file once also gave the
    catch-up's start, which then overrode a `start_date` of config/pipeline.yaml)."""
    env = DEFAULTS["airflow-scheduler"].environment
    given = {var: env[var] for var in _settings_variables() if env[var]}
    assert given == {
        "TOKOKITA_CONFIG": "/opt/airflow/config/pipeline.yaml",
        **{f"TOKOKITA_{folder}_DIR": f"/opt/airflow/data/{folder.lower()}"
           for folder in ("RAW", "GOLD", "QUARANTINE", "STATE", "STAGING", "WORK")}}


@pytest.mark.skipif(not DOCKER_COMPOSE, reason="docker-compose is not installed "
                    "(apt-get install -y docker-compose)")
@pytest.mark.parametrize("profile", ["default", "scale-out"])
def test_docker_compose_resolves_every_settings_variable_into_every_airflow_service(profile):
    """`docker-compose config` (compose v1) with every variable of the model set in the
    environment: each Airflow service of the profile gets each value as set."""
    variables = _settings_variables()
    given = {var: f"given-{index}" for index, var in enumerate(variables)}
    args = ("--env-file", str(REPO / "config" / "scale-out.env")) if profile == "scale-out" \
        else ()
    resolved = yaml.safe_load(_compose_config(*args, env=given))["services"]
    names = [*AIRFLOW_SERVICES, "airflow-init"]
    if profile == "scale-out":
        names += ["airflow-worker", "airflow-worker-2"]
        assert resolved["airflow-scheduler"]["environment"]["AIRFLOW__CORE__EXECUTOR"] == \
            "CeleryExecutor"
    assert set(names) <= set(resolved)
    for name in names:
        env = resolved[name]["environment"]
        assert {var: env.get(var) for var in variables} == given, name


def test_the_embedded_stack_gives_every_settings_variable_of_the_shell_to_every_service():
    """Regression: the embedded stack handed its services a fixed list of four TOKOKITA_*
    variables: `TOKOKITA_ON_RAW_CHANGE=reprocess make up` reached `tokokita-etl status` in
    the same shell, not the sweep DAG."""
    from stack.embedded import embedded_target
    from stack.local import LocalStack

    variables = _settings_variables()
    shell = {var: f"/given/{index}" for index, var in enumerate(variables)}
    stack = LocalStack(embedded_target(api_port=8080, health_port=8974, env=shell))
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        env = stack.env(name)
        assert {var: env.get(var) for var in variables} == shell, name


#: a valid value other than the default for every setting
NON_DEFAULT = {
    "pipeline": "etl-other", "cron": "5 1 * * *", "timezone": "Asia/Makassar",
    "lookback_days": "9", "max_attempts": "4", "raw_dir": "/x/raw", "gold_dir": "/x/gold",
    "quarantine_dir": "/x/quarantine", "state_dir": "/x/state", "staging_dir": "/x/staging",
    "work_dir": "/x/work", "warehouse_url": "postgresql+psycopg://etl:secret@db:5432/wh",
    "state_url": "warehouse", "warehouse_conn_id": "wh", "state_conn_id": "st",
    "object_storage_conn_id": "objects", "duckdb_memory_limit": "300MB",
    "wait_window_hours": "5", "claim_ttl_hours": "4", "sweep_cron": "20 * * * *",
    "start_date": "2026-10-01", "end_date": "2026-12-01T06:00:00", "volume_min_share": "0.3",
    "volume_check": "fail", "on_raw_change": "reprocess", "ping_url": "https://hc.example/p",
    "deadline_local_time": "07:30", "deadline_webhook_url": "https://hooks.example/d",
    "notifiers": '[{"class": "package.module.Notifier"}]', "declarations": "module:NAME",
    "db_connect_timeout_s": "11", "db_statement_timeout_s": "601",
    "db_answer_timeout_s": "46", "db_lock_timeout_s": "61",
}


#: the folder settings, which the compose file gives as container paths unless set
FOLDERS = ("raw_dir", "gold_dir", "quarantine_dir", "state_dir", "staging_dir", "work_dir")


@pytest.mark.parametrize("half", [0, 1])
def test_every_setting_as_yaml_or_as_a_variable_reads_the_same_in_each_service_and_the_shell(
        tmp_path, half):
    """Each setting given away from its default, half of them in the YAML file that
    TOKOKITA_CONFIG names and half as variables, then the other way round (the folders as
    variables both times: in the containers they are paths the compose file gives unless a
    variable does, docs/configuration.md): the settings each
    Airflow service (both profiles' LocalExecutor services, airflow-init and the Celery
    workers) reads from the environment the compose file gives it as a local process (what a
    task's `load_settings` sees) are the shell's, value and source, for the orders and the
    weekly city report (the running stack: tests/e2e/test_one_configuration.py)."""
    from stack.local import LocalStack, LocalTarget
    from tokokita_etl.orders.settings import OrdersSettings
    from tokokita_etl.pipelines import PIPELINES, settings_of
    from tokokita_etl.runner.settings import PipelineSettings
    from tokokita_etl.settings.model import env_var, pipeline_env_var
    from tokokita_etl.settings.sources import section_fields

    SETTINGS = OrdersSettings.model_fields
    OWN_SETTINGS = section_fields(PipelineSettings)
    from tokokita_etl.settings.show import shown

    assert set(NON_DEFAULT) == set(SETTINGS)  # a new setting needs a value here
    weekly = "weekly_city_report"
    in_yaml: dict = {"pipelines": {weekly: {}}}
    shell = {"TOKOKITA_CONFIG": str(tmp_path / "settings.yaml")}
    for index, (name, value) in enumerate(NON_DEFAULT.items()):
        if index % 2 == half and name not in FOLDERS:
            in_yaml[name] = value
        else:
            shell[env_var(name)] = value
    for index, name in enumerate(OWN_SETTINGS):
        value = NON_DEFAULT[name]
        if index % 2 != half:
            in_yaml["pipelines"][weekly][name] = value
        else:
            shell[pipeline_env_var(weekly, name)] = value
    (tmp_path / "settings.yaml").write_text(yaml.safe_dump(in_yaml), encoding="utf-8")

    names = (*AIRFLOW_SERVICES, "airflow-init", "airflow-worker", "airflow-worker-2")
    stack = LocalStack(LocalTarget(
        airflow_home=tmp_path / "home", api_port=18123, scheduler_health_port=18974,
        databases={"airflow": "sqlite:////x/airflow.db", "tokokita": "sqlite:////x/wh.db"},
        compose_env=shell), names=names)
    for pipeline in (PIPELINES["orders"], PIPELINES[weekly]):
        in_shell = shown(settings_of(pipeline, env=shell, cwd=tmp_path))
        assert {value for name, value, _ in in_shell if name not in ("pipeline",)} >= \
            {v for n, v in NON_DEFAULT.items() if n in OWN_SETTINGS and "secret" not in v}
        for name in names:
            env = stack.env(name)
            assert shown(settings_of(pipeline, env=env, cwd=tmp_path)) == in_shell, \
                (pipeline.name, name)
