"""The Airflow connections the stack's services are given, read outside those services.

The compose file gives the services the warehouse and the object store as Airflow connections
(`AIRFLOW_CONN_TOKOKITA_WAREHOUSE`, `AIRFLOW_CONN_AWS_DEFAULT`); the embedded stack and the
test stacks keep them in Airflow's metadata database instead, added there by airflow-init
from the same variables (`stack.local`, `stack.init`) or through the REST API
(`stack.ephemeral`). The airflow-init service, the demo's closing status and the tests read
the pipeline's settings as the tasks resolve them, with the rules of the Airflow adapter
(`tokokita_airflow.connections`), from these definitions: `pipeline_settings`. A connection
is parsed with Airflow's own `Connection` (JSON or URI form, as the `AIRFLOW_CONN_*`
variables take it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stack import REPO

WAREHOUSE_CONN_ID = "tokokita_warehouse"
OBJECT_STORE_CONN_ID = "aws_default"
CONN_PREFIX = "AIRFLOW_CONN_"
#: `true`: airflow-init adds the connections of its environment to Airflow's metadata database
#: (`stack.init.add_connections`; the embedded stack and the test stacks, `stack.local`)
ADD_CONNECTIONS_VAR = "TOKOKITA_INIT_ADD_CONNECTIONS"


def _adapter(env: Mapping[str, str]):
    """`tokokita_airflow.connections`, from the plugins folder the services load it from."""
    folder = env.get("AIRFLOW__CORE__PLUGINS_FOLDER") or str(REPO / "plugins")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    from tokokita_airflow import connections

    return connections


def parse(conn_id: str, value: str) -> Any:
    """An `AIRFLOW_CONN_<ID>` value (JSON or URI) as Airflow's Connection."""
    from airflow.sdk import Connection

    if value.lstrip().startswith("{"):
        return Connection.from_json(value, conn_id=conn_id)
    return Connection.from_uri(value, conn_id=conn_id)


def env_connections(env: Mapping[str, str]) -> dict[str, Any]:
    """The connections an environment defines (non-empty `AIRFLOW_CONN_*`), by id."""
    return {name.removeprefix(CONN_PREFIX).lower(): parse(name.removeprefix(CONN_PREFIX).lower(),
                                                          value)
            for name, value in env.items() if name.startswith(CONN_PREFIX) and value}


def warehouse_url(env: Mapping[str, str], connections: Mapping[str, Any] | None = None,
                  root: Path | None = None) -> str | None:
    """The URL of the warehouse connection (None when it is not among `connections`, by
    default those of `env`)."""
    connections = env_connections(env) if connections is None else connections
    conn = connections.get(WAREHOUSE_CONN_ID)
    if conn is None:
        return None
    return _adapter(env).database_url(conn, "warehouse_conn_id",
                                      root=root or Path(env.get("TOKOKITA_HOME") or REPO))


def storage_options(env: Mapping[str, str],
                    connections: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The s3fs options of the object-store connection (None when it is not defined)."""
    connections = env_connections(env) if connections is None else connections
    conn = connections.get(OBJECT_STORE_CONN_ID)
    return None if conn is None else _adapter(env).storage_options(conn)


def aws_env(options: Mapping[str, Any] | None) -> dict[str, str]:
    """The AWS environment of s3fs `options`, for a process that is no Airflow service (the
    tests' own reads and writes of the stack's bucket)."""
    if not options:
        return {}
    env = {"AWS_ACCESS_KEY_ID": options.get("key"), "AWS_SECRET_ACCESS_KEY": options.get("secret"),
           "AWS_ENDPOINT_URL": options.get("endpoint_url"),
           "AWS_DEFAULT_REGION": (options.get("config_kwargs") or {}).get("region_name")}
    return {name: value for name, value in env.items() if value}


def pipeline_settings(env: Mapping[str, str], *, cwd: Path,
                      connections: Mapping[str, Any] | None = None, pipeline: Any = None):
    """The settings the services' tasks resolve for `pipeline` (default: the orders): `env`'s
    TOKOKITA_* settings with the warehouse and state database of the connections (default:
    `env`'s AIRFLOW_CONN_*)."""
    from tokokita_etl.pipelines import DEFAULT, by_name, settings_of

    connections = env_connections(env) if connections is None else connections
    settings = settings_of(pipeline or by_name(DEFAULT), env=env, cwd=cwd, in_airflow=True)
    changes = {}
    if settings.warehouse_conn_id and settings.warehouse_conn_id in connections:
        changes["warehouse_url"] = _adapter(env).database_url(
            connections[settings.warehouse_conn_id], "warehouse_conn_id", root=cwd)
    if settings.state_conn_id and settings.state_conn_id in connections:
        changes["state_url"] = _adapter(env).database_url(
            connections[settings.state_conn_id], "state_conn_id", root=cwd, postgres_only=True)
    return settings.replace(**changes)


def rest_body(conn: Any) -> dict[str, Any]:
    """The body of `POST /api/v2/connections` that creates `conn`."""
    body = {"connection_id": conn.conn_id, "conn_type": conn.conn_type, "host": conn.host,
            "login": conn.login, "password": conn.password, "schema": conn.schema,
            "port": conn.port, "extra": conn.extra}
    return {key: value for key, value in body.items() if value not in (None, "")}


def as_json(conn: Any) -> str:
    """`conn` in the JSON form of an `AIRFLOW_CONN_*` variable."""
    return json.dumps({key: value for key, value in {
        "conn_type": conn.conn_type, "host": conn.host, "login": conn.login,
        "password": conn.password, "schema": conn.schema, "port": conn.port,
        "extra": json.loads(conn.extra) if conn.extra else None}.items()
        if value not in (None, "")})
