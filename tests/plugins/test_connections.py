"""The warehouse, state database and object store given as Airflow connections
(`tokokita_airflow.connections`), read through Airflow's connection API from `AIRFLOW_CONN_*`
variables, against real PostgreSQL servers and a real S3-compatible server."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import structlog
from sqlalchemy import text
from structlog.testing import capture_logs

from tests.conftest import PG_URL
from tokokita_airflow.connections import ConnectionProblem, failing_at_once, resolve
from tokokita_etl.errors import AccessDeniedError
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.pipelines import load_settings
from tokokita_etl.runner.policy import ErrorKind, classify
from tokokita_etl.warehouse.database import Warehouse

WRONG_PASSWORD = "wrong-Pw-7Hq2xV"


@pytest.fixture
def settings_of(tmp_path, monkeypatch):
    """The settings as the tasks configure them (no TOKOKITA_* variable of the caller), then
    resolved through the Airflow connections (`connections.resolve`)."""
    for name in [k for k in os.environ if k.startswith(("TOKOKITA_", "AWS_"))]:
        monkeypatch.delenv(name)

    def settings(**overrides):
        return resolve(load_settings(env={}, overrides=overrides, cwd=tmp_path, in_airflow=True),
                       root=tmp_path)

    return settings


def pg_connection_uri(url: str) -> str:
    """The Airflow connection URI of a SQLAlchemy PostgreSQL URL."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def select_one(url: str) -> int:
    with Warehouse(url, "UTC").begin() as conn:
        return conn.execute(text("SELECT 1")).scalar_one()


def test_a_postgres_connection_uri_is_the_warehouse_url_the_tasks_open(settings_of, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE",
                       pg_connection_uri(PG_URL) + "?sslmode=disable&unrelated=1")
    url = settings_of().warehouse_url
    assert url == PG_URL.replace("postgresql+psycopg://", "postgresql+psycopg://", 1) + \
        "?sslmode=disable"
    assert select_one(url) == 1


def test_a_json_connection_with_a_password_of_url_characters_opens_a_password_server(
        settings_of, monkeypatch, password_postgres):
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps({
        "conn_type": "postgres", "host": password_postgres.host, "port": password_postgres.port,
        "login": password_postgres.user, "password": password_postgres.password,
        "schema": "postgres"}))
    url = settings_of().warehouse_url
    assert url.startswith("postgresql+psycopg://tokokita_etl:")
    assert select_one(url) == 1


def test_state_url_warehouse_follows_the_warehouse_connection(settings_of, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", pg_connection_uri(PG_URL))
    settings = settings_of(state_url="warehouse")
    assert settings.state_db_url == settings.warehouse_url == PG_URL
    from tokokita_etl.runner.stores import state_store
    from tokokita_etl.runner.stores.database import DatabaseStateStore

    store = state_store(settings)
    assert isinstance(store, DatabaseStateStore)
    assert store.read().runs is not None


def test_state_conn_id_names_a_state_database_of_its_own(settings_of, monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps(
        {"conn_type": "sqlite", "host": "data/warehouse/w.db"}))
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_STATE", pg_connection_uri(PG_URL))
    settings = settings_of(state_conn_id="tokokita_state")
    assert settings.warehouse_url == f"sqlite:///{tmp_path}/data/warehouse/w.db"
    assert settings.state_db_url == PG_URL


def test_a_sqlite_warehouse_with_state_url_warehouse_is_refused_naming_the_connection(
        settings_of, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps(
        {"conn_type": "sqlite", "host": "/tmp/w.db"}))
    with pytest.raises(ConnectionProblem,
                       match=re.escape("'tokokita_warehouse' (warehouse_conn_id) is SQLite")):
        settings_of(state_url="warehouse")


def test_a_missing_connection_fails_in_one_line_naming_its_id_and_setting(settings_of, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", raising=False)
    with pytest.raises(ConnectionProblem) as missing:
        settings_of()
    message = str(missing.value)
    assert message.startswith("Airflow connection 'tokokita_warehouse' (warehouse_conn_id) is "
                              "not defined: define it as AIRFLOW_CONN_TOKOKITA_WAREHOUSE")
    assert "set warehouse_conn_id empty to use warehouse_url" in message
    assert "\n" not in message
    with pytest.raises(ConnectionProblem, match=re.escape("'no_such_state' (state_conn_id) is not defined")):
        monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", pg_connection_uri(PG_URL))
        settings_of(state_conn_id="no_such_state")


def test_an_empty_warehouse_conn_id_keeps_warehouse_url(settings_of, tmp_path):
    settings = settings_of(warehouse_conn_id="", warehouse_url="sqlite:///plain.db")
    assert settings.warehouse_url == f"sqlite:///{tmp_path}/plain.db"


def test_a_connection_of_another_type_is_refused_naming_it(settings_of, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", "mysql://u:secret-x@db/shop")
    with pytest.raises(ConnectionProblem) as refused:
        settings_of()
    assert str(refused.value) == ("Airflow connection 'tokokita_warehouse' (warehouse_conn_id) "
                                  "has conn type 'mysql'; the pipeline needs postgres or sqlite")


def test_a_wrong_password_fails_at_once_in_one_line_naming_the_connection_without_the_secret(
        settings_of, monkeypatch, password_postgres):
    """A refused login was a transient WarehouseError that Airflow retried."""
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps({
        "conn_type": "postgres", "host": password_postgres.host, "port": password_postgres.port,
        "login": password_postgres.user, "password": WRONG_PASSWORD, "schema": "postgres"}))
    url = settings_of().warehouse_url
    with pytest.raises(AccessDeniedError) as denied:
        select_one(url)
    assert classify(denied.value) is ErrorKind.NOT_AN_ATTEMPT  # no attempt, no retry
    with capture_logs() as logged, pytest.raises(ConnectionProblem) as failed, \
            failing_at_once(structlog.get_logger("task")):
        select_one(url)
    # the failure's message is one sentence: the connection at fault and what to do
    assert str(failed.value) == ("Airflow connection 'tokokita_warehouse': the database "
                                 "refused its login: correct its login or password")
    # the detail is the line logged before it
    [detail] = [entry["event"] for entry in logged]
    assert detail.startswith("Refused: ")
    message = detail.removeprefix("Refused: ")
    assert message.startswith("Airflow connection 'tokokita_warehouse': warehouse "
                              f"postgresql+psycopg://tokokita_etl:***@127.0.0.1:"
                              f"{password_postgres.port}/postgres: ")
    assert 'password authentication failed for user "tokokita_etl"' in message
    assert "\n" not in message
    assert WRONG_PASSWORD not in message and WRONG_PASSWORD not in str(denied.value)
    assert WRONG_PASSWORD not in str(failed.value)


def test_the_object_store_connection_gives_the_storage_its_endpoint_and_keys(
        settings_of, monkeypatch, tmp_path):
    """No AWS variable: without the connection the client would ask AWS itself."""
    from devtools.object_store import s3_server
    from tokokita_etl import storage

    with s3_server() as server:
        server.create_bucket("lake")
        monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps(
            {"conn_type": "sqlite", "host": "w.db"}))
        monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({
            "conn_type": "aws", "login": "lake-key", "password": "lake-secret",
            "extra": {"endpoint_url": server.endpoint, "region_name": "us-east-1"}}))
        settings = settings_of(object_storage_conn_id="lake", raw_dir="s3://lake/raw")
        local = Path(tmp_path / "p.csv")
        local.write_text("a,b\n", encoding="utf-8")
        storage.upload(local, f"{settings.raw_dir}/p.csv")
        assert storage.file_size(f"{settings.raw_dir}/p.csv") == 4
        fs, _ = storage.filesystem(settings.raw_dir)
        assert (fs.key, fs.endpoint_url) == ("lake-key", server.endpoint)
        assert fs.config_kwargs == {"region_name": "us-east-1"}
        fs.mkdir("lake-2")  # a region in botocore's config, no location constraint


def test_local_folders_need_no_object_store_connection(settings_of, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps(
        {"conn_type": "sqlite", "host": "w.db"}))
    monkeypatch.delenv("AIRFLOW_CONN_AWS_DEFAULT", raising=False)
    assert settings_of().object_storage_conn_id == "aws_default"  # not read: nothing uses it
    with pytest.raises(ConnectionProblem, match=re.escape("'aws_default' (object_storage_conn_id) is not "
                                                          "defined")):
        settings_of(gold_dir="s3://lake/gold")


def test_the_status_page_answers_503_naming_the_connection_without_its_password(
        project, monkeypatch, password_postgres):
    """The status page reads the state of `state_url: warehouse` through the connection."""
    from fastapi import HTTPException

    from tokokita_airflow.status_page.data import status_rows

    monkeypatch.setenv("TOKOKITA_STATE_URL", "warehouse")
    monkeypatch.setenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE", json.dumps({
        "conn_type": "postgres", "host": password_postgres.host, "port": password_postgres.port,
        "login": password_postgres.user, "password": WRONG_PASSWORD, "schema": "postgres"}))
    with pytest.raises(HTTPException) as refused:
        status_rows(ORDERS, 7)
    assert refused.value.status_code == 503
    detail = str(refused.value.detail)
    assert detail.startswith("Airflow connection 'tokokita_warehouse': state database "
                             "postgresql+psycopg://tokokita_etl:***@")
    assert "password authentication failed" in detail and WRONG_PASSWORD not in detail
    monkeypatch.delenv("AIRFLOW_CONN_TOKOKITA_WAREHOUSE")
    with pytest.raises(HTTPException, match=re.escape("'tokokita_warehouse' (warehouse_conn_id) "
                                                      "is not defined")):
        status_rows(ORDERS, 7)
