"""Warehouse fixtures for the database tests: a fresh PostgreSQL schema per test, and
workspaces on an SQLite file or on PostgreSQL (`backend` runs a test on both).

The PostgreSQL server is the run's (``TOKOKITA_TEST_PG_URL``, which tests/conftest.py's
`pytest_configure` has resolved and exported before this file is imported). Each test that
asks for ``pg_url`` gets a fresh schema selected through the URL query
``?options=-csearch_path=<schema>``; the schema is dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Workspace


def _pg_server_url() -> str:
    """The run's PostgreSQL URL, as `pytest_configure` exported it."""
    return os.environ["TOKOKITA_TEST_PG_URL"]


def _pg_admin_conninfo(url: str) -> str:
    """A libpq conninfo for the server of a SQLAlchemy PostgreSQL URL."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def _pg_connect(url: str):
    import psycopg

    try:
        return psycopg.connect(_pg_admin_conninfo(url), autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is unreachable at {url} (set TOKOKITA_TEST_PG_URL): {exc}",
                    pytrace=False)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A SQLAlchemy URL whose search_path is a fresh, empty schema (dropped afterwards)."""
    from sqlalchemy.engine import make_url

    schema = f"t_{uuid.uuid4().hex[:16]}"
    with _pg_connect(_pg_server_url()) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = make_url(_pg_server_url()).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with _pg_connect(_pg_server_url()) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request) -> str:
    """The warehouse backend name; pipeline tests run on both."""
    return request.param


@pytest.fixture
def workspace(tmp_path: Path, backend: str, request) -> Workspace:
    """A workspace on the parametrised backend (SQLite file or a fresh PostgreSQL schema)."""
    if backend == "postgresql":
        url = request.getfixturevalue("pg_url")
    else:
        url = f"sqlite:///{tmp_path / 'warehouse' / 'tokokita.db'}"
    return Workspace(tmp_path, url)


@pytest.fixture
def sqlite_workspace(tmp_path: Path) -> Workspace:
    """A workspace on an SQLite file warehouse."""
    return Workspace(tmp_path, f"sqlite:///{tmp_path / 'warehouse' / 'tokokita.db'}")


def lose_warehouse(url_text: str) -> None:
    """The warehouse at `url_text` is lost: its SQLite file removed, or its PostgreSQL schema
    emptied."""
    from sqlalchemy.engine import make_url

    url = make_url(url_text)
    if url.get_backend_name() == "sqlite":
        Path(url.database).unlink()
        return
    schema = url.query["options"].split("search_path=", 1)[1]
    with _pg_connect(url_text) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')


def warehouse_tables(url_text: str) -> list[str]:
    """The tables the warehouse at `url_text` holds (none when its SQLite file is not there)."""
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.engine import make_url

    url = make_url(url_text)
    if url.get_backend_name() == "sqlite" and not Path(url.database).exists():
        return []
    engine = create_engine(url)
    try:
        return sorted(inspect(engine).get_table_names())
    finally:
        engine.dispose()
