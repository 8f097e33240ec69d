"""The warehouse, the state database and the object store as Airflow connections.

Inside Airflow the pipeline's outside systems are Airflow connections, read through Airflow's
connection API (`airflow.sdk.Connection`), so `AIRFLOW_CONN_*` variables, the UI's connection
form, the REST API and any secrets backend work, and Airflow masks the secrets it hands out:

- `warehouse_conn_id` (default `tokokita_warehouse`): conn type `postgres` -> the
  `postgresql+psycopg://` URL the package's `Warehouse` opens, `sqlite` -> `sqlite:///<host>`;
  it replaces `warehouse_url` (empty: `warehouse_url` inside Airflow too). `state_url:
  warehouse` then means this connection's database;
- `state_conn_id` (default empty): a separate PostgreSQL state database, replacing `state_url`;
- `object_storage_conn_id` (default `aws_default`): conn type `aws`, login and password the
  access key and secret, the extras `endpoint_url`, `region_name` and `aws_session_token` as
  the Amazon provider reads them; used when a data folder is an `s3://` URL, handed to
  `tokokita_etl.storage.use_options` (empty: the AWS environment of the process).

A connection that is not defined, or of a type the pipeline cannot use, fails the task at once
(`ConnectionProblem`, an `AirflowFailException`: no retry) with one line naming it, unless the
API server did not answer the task (`ConnectionsUnreachable`: transient, retried); a database
that refuses the connection's login (`AccessDeniedError`) is named the same way by `named`.
No message here carries a password: URLs are shown as SQLAlchemy renders them with the
password hidden.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException

if TYPE_CHECKING:
    from tokokita_etl.settings.model import Settings

POSTGRES_TYPES = ("postgres", "postgresql")
SQLITE_TYPES = ("sqlite",)
AWS_TYPES = ("aws", "s3")
#: connection extras passed to PostgreSQL as libpq parameters (the rest is ignored)
LIBPQ_EXTRAS = ("sslmode", "sslcert", "sslkey", "sslrootcert", "sslcrl", "options",
                "application_name", "target_session_attrs", "keepalives", "keepalives_idle")
#: the SQLAlchemy driver of a PostgreSQL connection (what `tokokita_etl.warehouse.database` opens)
POSTGRES_DRIVER = "postgresql+psycopg"

#: display URL (password hidden) -> the id of the connection it was made from, in this process
_ORIGINS: dict[str, str] = {}


class ConnectionProblem(AirflowFailException):
    """A configured Airflow connection is missing or unusable: the task fails at once."""


def _display(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _define_hint(conn_id: str) -> str:
    return (f"define it as AIRFLOW_CONN_{conn_id.upper()}, in the UI (Admin > Connections), "
            "through the REST API or in a secrets backend")


class ConnectionsUnreachable(ConnectionError):
    """Inside a task, the Airflow API server did not answer whether a connection exists (it
    is restarting, or the network dropped): a transient error, which Airflow retries."""


def get_connection(conn_id: str, setting: str, empty_means: str) -> Any:
    """Airflow's connection `conn_id` (named by the setting `setting`); ConnectionProblem when
    it is not defined, ConnectionsUnreachable when the API server could not say."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return Connection.get(conn_id)
    except AirflowNotFoundException:
        if not _api_server_says_missing(conn_id):
            raise ConnectionsUnreachable(
                f"Airflow connection {conn_id!r} ({setting}) could not be read: the Airflow "
                "API server did not answer this task (restarting?); the task is retried"
            ) from None
        raise _not_defined(conn_id, setting, empty_means) from None


def _api_server_says_missing(conn_id: str) -> bool:
    """Whether the Airflow API server answered this task that `conn_id` does not exist.

    Airflow's lookup (`Connection.get`) reports a connection the API server did not find and
    an API server that did not answer alike, as not found; asked again through the task's
    supervisor, the answer tells them apart. Outside a task (no supervisor) nothing else was
    asked: True.
    """
    from airflow.sdk.exceptions import ErrorType
    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.comms import ErrorResponse, GetConnection

    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    if comms is None:
        return True
    answer = comms.send(GetConnection(conn_id=conn_id))
    return isinstance(answer, ErrorResponse) and answer.error is ErrorType.CONNECTION_NOT_FOUND


def _not_defined(conn_id: str, setting: str, empty_means: str) -> ConnectionProblem:
    return ConnectionProblem(
        f"Airflow connection {conn_id!r} ({setting}) is not defined: "
        f"{_define_hint(conn_id)}, or set {setting} empty to use {empty_means}")


def database_url(conn: Any, setting: str, *, root: Path, postgres_only: bool = False) -> str:
    """The SQLAlchemy URL of a database connection: `postgresql+psycopg://...` for conn type
    postgres, `sqlite:///<host>` for sqlite (a relative path against `root`)."""
    from sqlalchemy.engine import URL

    conn_type = (conn.conn_type or "").lower()
    allowed = POSTGRES_TYPES if postgres_only else POSTGRES_TYPES + SQLITE_TYPES
    if conn_type not in allowed:
        raise ConnectionProblem(
            f"Airflow connection {conn.conn_id!r} ({setting}) has conn type {conn_type!r}; "
            f"the pipeline needs {' or '.join(dict.fromkeys(t for t in allowed if t != 'postgresql'))}")
    if conn_type in SQLITE_TYPES:
        path = conn.host or conn.schema or ""
        if not path:
            raise ConnectionProblem(f"Airflow connection {conn.conn_id!r} ({setting}): a sqlite "
                                    "connection needs the database file's path as its host")
        if path != ":memory:" and not Path(path).is_absolute():
            path = str(root / path)
        _ORIGINS[_display(f"sqlite:///{path}")] = conn.conn_id
        return f"sqlite:///{path}"
    extras = conn.extra_dejson if conn.extra else {}
    query = {key: str(extras[key]) for key in LIBPQ_EXTRAS if extras.get(key) not in (None, "")}
    url = URL.create(POSTGRES_DRIVER, username=conn.login or None, password=conn.password or None,
                     host=conn.host or None, port=conn.port or None,
                     database=conn.schema or None, query=query)
    text = url.render_as_string(hide_password=False)
    _ORIGINS[_display(text)] = conn.conn_id
    return text


def storage_options(conn: Any, extras: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The s3fs options of an `aws` connection: key and secret (login, password), the extras
    `endpoint_url` (also `host`, or `service_config.s3.endpoint_url`, as the Amazon provider
    reads them), `region_name` and `aws_session_token`."""
    conn_type = (conn.conn_type or "").lower()
    if conn_type not in AWS_TYPES:
        raise ConnectionProblem(
            f"Airflow connection {conn.conn_id!r} (object_storage_conn_id) has conn type "
            f"{conn_type!r}; the pipeline needs aws")
    if extras is None:
        extras = conn.extra_dejson if conn.extra else {}
    options: dict[str, Any] = {}
    if conn.login:
        options["key"] = conn.login
    if conn.password:
        options["secret"] = conn.password
    if extras.get("aws_session_token"):
        options["token"] = extras["aws_session_token"]
    service = ((extras.get("service_config") or {}).get("s3") or {})
    endpoint = service.get("endpoint_url") or extras.get("endpoint_url") or extras.get("host")
    if endpoint:
        options["endpoint_url"] = endpoint
    if extras.get("region_name"):
        # botocore's config, not `client_kwargs`: s3fs would send a region there as the
        # location constraint of every bucket it creates (refused for us-east-1)
        options["config_kwargs"] = {"region_name": extras["region_name"]}
    return options


def uses_object_storage(settings: Settings) -> bool:
    """Whether a data folder of `settings` is an object-storage URL."""
    from tokokita_etl.storage import is_url

    return any(is_url(getattr(settings, name))
               for name in ("raw_dir", "staging_dir", "gold_dir", "quarantine_dir"))


def use_object_storage(conn_id: str) -> None:
    """Give the package's storage the s3fs options of the object-storage connection
    `conn_id` (the `object_storage_conn_id` setting; empty: nothing, the AWS environment)."""
    from tokokita_etl.storage import use_options

    if conn_id:
        conn = get_connection(conn_id, "object_storage_conn_id", "the AWS environment")
        use_options("s3", storage_options(conn))


async def ause_object_storage(conn_id: str) -> None:
    """`use_object_storage` for the triggerer's event loop: the connection read with
    Airflow's async connection API."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    from tokokita_etl.storage import use_options

    try:
        conn = await Connection.async_get(conn_id)
    except AirflowNotFoundException:
        raise _not_defined(conn_id, "object_storage_conn_id", "the AWS environment") from None
    extras = await conn.aextra_dejson() if conn.extra else {}
    use_options("s3", storage_options(conn, extras))


def state_needs_connection(settings: Settings) -> bool:
    """Whether `resolve` reads an Airflow connection to reach the watermark: `state_conn_id`,
    or `state_url: warehouse` with the warehouse of `warehouse_conn_id`."""
    return bool(settings.state_conn_id) or (settings.state_url == "warehouse"
                                            and bool(settings.warehouse_conn_id))


def resolve(settings: Settings, *, root: Path) -> Settings:
    """`settings` with the URLs of its Airflow connections (`warehouse_conn_id`,
    `state_conn_id`) and the object store's options given to the storage."""
    changes: dict[str, str] = {}
    if settings.warehouse_conn_id:
        conn = get_connection(settings.warehouse_conn_id, "warehouse_conn_id", "warehouse_url")
        changes["warehouse_url"] = database_url(conn, "warehouse_conn_id", root=root)
    if settings.state_conn_id:
        conn = get_connection(settings.state_conn_id, "state_conn_id", "state_url")
        changes["state_url"] = database_url(conn, "state_conn_id", root=root, postgres_only=True)
    warehouse_url = changes.get("warehouse_url", settings.warehouse_url)
    if changes.get("state_url", settings.state_url) == "warehouse" and \
            not warehouse_url.startswith("postgres"):
        source = (f"Airflow connection {settings.warehouse_conn_id!r} (warehouse_conn_id)"
                  if "warehouse_url" in changes else "warehouse_url")
        raise ConnectionProblem(f"state_url 'warehouse' needs a PostgreSQL warehouse; {source} "
                                "is SQLite (leave state_url empty, or set state_conn_id)")
    resolved = settings.replace(**changes)
    if uses_object_storage(resolved):
        use_object_storage(resolved.object_storage_conn_id)
    return resolved


def named(error: BaseException) -> BaseException:
    """`error`, naming the Airflow connection of its database when it is an
    `AccessDeniedError` (a refused login) or a `WarehouseIdentityError` (not the watermark's
    warehouse) of a database this process resolved from a connection."""
    from tokokita_etl.errors import AccessDeniedError
    from tokokita_etl.runner.identity import WarehouseIdentityError

    if isinstance(error, AccessDeniedError | WarehouseIdentityError) \
            and error.url in _ORIGINS and not str(error).startswith("Airflow connection"):
        return type(error)(f"Airflow connection {_ORIGINS[error.url]!r}: {error}",
                           url=error.url)
    return error


def source_of(error: BaseException) -> str:
    """What a refused database error is to be fixed in: the Airflow connection its database
    was resolved from in this process, else the setting (`warehouse_url`, `state_url`)."""
    from tokokita_etl.runner.identity import WarehouseIdentityError

    url = getattr(error, "url", "")
    if url in _ORIGINS:
        return f"Airflow connection {_ORIGINS[url]!r}"
    if isinstance(error, WarehouseIdentityError):
        return "warehouse_url"
    return url or "the database"


@contextlib.contextmanager
def failing_at_once(log: Any = None) -> Iterator[None]:
    """A refused database login, or a warehouse that is not the watermark's, fails the task
    at once (no retry): the detail (URL, the database's answer) logged on one line to `log`,
    then the failure's own message, one sentence naming the connection and what to do
    (`outcomes.refusal`), raised without the error it replaces."""
    from tokokita_etl.errors import AccessDeniedError
    from tokokita_etl.runner.identity import WarehouseIdentityError
    from tokokita_etl.runner.outcomes import refusal

    try:
        yield
    except (AccessDeniedError, WarehouseIdentityError) as exc:
        if log is not None:
            log.error("Refused: %s", named(exc))
        raise ConnectionProblem(refusal(exc, source_of(exc))) from None

