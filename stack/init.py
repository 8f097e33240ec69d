"""The `airflow-init` service (`python -m stack.init`): prepare everything the stack needs.

Idempotent, driven only by the environment docker-compose.yaml declares:

1. the folders of the pipeline (`TOKOKITA_*_DIR`), the task logs and the login file exist;
   run as root, it gives the folders it creates (and empty root-owned ones: fresh named
   volumes) to `AIRFLOW_UID` (group 0) and changes the owner of nothing else: the host's
   files and folders in ./data keep theirs;
2. `airflow db migrate` on `AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`, then the upgrade in place
   to partitions: the DAG's runs made before it get the partition date of their key
   (`tokokita_airflow.upgrade`; nothing to do on a new database);
3. the admin login: `_AIRFLOW_WWW_USER_USERNAME` / `_AIRFLOW_WWW_USER_PASSWORD` are written
   to the SimpleAuthManager password file the api-server reads;
4. the warehouse: refused first, before any other step creates anything, when a watermark
   of any pipeline describes another warehouse (`check_warehouse`: one line, the remedy
   `tokokita-etl state reconcile`); else the database of the warehouse's Airflow connection
   (`AIRFLOW_CONN_TOKOKITA_WAREHOUSE`; `TOKOKITA_WAREHOUSE_URL` when there is none) is created
   on its PostgreSQL server when missing (or the SQLite file's folder), then its tables. A
   connection defined elsewhere (the UI, the REST API, a secrets backend) is not read here:
   the first load then creates the tables. The buckets of the s3:// folders are made with
   the object store's connection (`AIRFLOW_CONN_AWS_DEFAULT`), as the tasks reach them;
5. with `TOKOKITA_INIT_ADD_CONNECTIONS=true` (the embedded stack and the test stacks, whose
   Airflow services get the `AIRFLOW_CONN_*` variables empty: `stack.local`), each connection
   of the environment is added to Airflow's metadata database, as `airflow connections add`
   adds one, when the database has no connection of that id; one already there (edited in
   Admin > Connections, say) is kept as it is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

DATA_DIR_VARS = ("TOKOKITA_RAW_DIR", "TOKOKITA_GOLD_DIR", "TOKOKITA_QUARANTINE_DIR",
                 "TOKOKITA_STATE_DIR", "TOKOKITA_STAGING_DIR", "TOKOKITA_WORK_DIR")
DEFAULT_UID = 50000  # the uid the official image's services run as


def say(message: str) -> None:
    """One line of init output."""
    print(f"[airflow-init] {message}", flush=True)


def airflow_bin(env: Mapping[str, str]) -> str:
    """The `airflow` command: on PATH, else next to this Python."""
    found = shutil.which("airflow", path=env.get("PATH"))
    return found or str(Path(sys.executable).with_name("airflow"))


def owner_uid(env: Mapping[str, str]) -> int | None:
    """The uid the folders should belong to: AIRFLOW_UID (warns when unset)."""
    value = env.get("AIRFLOW_UID", "").strip()
    if not value:
        say("WARNING: AIRFLOW_UID is not set; files in the mounted folders will belong to uid "
            f"{DEFAULT_UID}. On Linux run: echo \"AIRFLOW_UID=$(id -u)\" > .env")
        return DEFAULT_UID
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"[airflow-init] AIRFLOW_UID must be a number, got {value!r}") from None


def prepare_folders(env: Mapping[str, str], uid: int | None) -> list[Path]:
    """Create the folders the services write to; as root, give the new ones to `uid`.

    Only a folder this step creates, or an empty one that belongs to root (a named volume
    docker has just created), changes owner, and never anything inside a folder: the host's
    files and folders in the mounts (the tracked sample partitions, a colleague's outputs)
    keep their owner. A folder the services write to that `uid` cannot write to is named in a
    warning.
    """
    folders = [Path(env[var]) for var in DATA_DIR_VARS if env.get(var) and "://" not in env[var]]
    if env.get("AIRFLOW__LOGGING__BASE_LOG_FOLDER"):
        folders.append(Path(env["AIRFLOW__LOGGING__BASE_LOG_FOLDER"]))
    if env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"):
        folders.append(Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]).parent)
    fresh: list[Path] = []
    for folder in folders:
        missing = [p for p in (folder, *folder.parents) if not p.exists()]
        folder.mkdir(parents=True, exist_ok=True)
        fresh.extend(missing)
        if not missing and folder.stat().st_uid == 0 and not any(folder.iterdir()):
            fresh.append(folder)  # e.g. a named volume docker just created
    if uid is not None and os.geteuid() == 0 and uid != 0:
        for path in dict.fromkeys(fresh):
            os.chown(path, uid, 0, follow_symlinks=False)
        if fresh:
            say(f"folders owned by {uid}:0: {', '.join(map(str, dict.fromkeys(fresh)))}")
        raw = Path(env["TOKOKITA_RAW_DIR"]) if env.get("TOKOKITA_RAW_DIR") else None
        for folder in folders:  # the services only read the raw folder
            if folder not in fresh and folder != raw and not writable_by(folder, uid, 0):
                say(f"WARNING: {folder} belongs to uid {folder.stat().st_uid} and uid {uid} "
                    "cannot write to it (its owner is left as it is). Run the stack as that "
                    "user: echo \"AIRFLOW_UID=$(id -u)\" > .env")
    return folders


def writable_by(path: Path, uid: int, gid: int) -> bool:
    """Whether a process of `uid` (group `gid`) may create files in the folder `path`."""
    st = path.stat()
    if st.st_uid == uid:
        return bool(st.st_mode & 0o300 == 0o300)
    if st.st_gid == gid:
        return bool(st.st_mode & 0o030 == 0o030)
    return bool(st.st_mode & 0o003 == 0o003)


def prepare_buckets(env: Mapping[str, str]) -> list[str]:
    """Create the buckets of the data folders that are object-storage URLs, when missing."""
    from stack.connections import storage_options
    from tokokita_etl.storage import filesystem, use_options

    if not any("://" in (env.get(var) or "") for var in DATA_DIR_VARS):
        return []
    options = storage_options(env)
    if options is None:
        say("no object-store connection in the environment (AIRFLOW_CONN_AWS_DEFAULT): the "
            "buckets of the s3:// folders are not checked; create them if they are missing")
        return []
    use_options("s3", options)
    made = []
    for var in DATA_DIR_VARS:
        url = env.get(var) or ""
        if "://" in url:
            fs, path = filesystem(url)
            bucket = path.split("/", 1)[0]
            if not fs.exists(bucket):
                fs.mkdir(bucket)
                made.append(bucket)
                say(f"created bucket {bucket!r} for {var}")
    return made


def migrate(env: Mapping[str, str]) -> None:
    """`airflow db migrate`."""
    say("airflow db migrate")
    subprocess.run([airflow_bin(env), "db", "migrate"], check=True, env=dict(env))


def write_login(env: Mapping[str, str], uid: int | None) -> str | None:
    """Write the admin's password into SimpleAuthManager's password file; return the login."""
    path_text = env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE")
    users = [u.strip() for u in env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "").split(",")
             if u.strip()]
    password = env.get("_AIRFLOW_WWW_USER_PASSWORD")
    if not path_text or not users or not password:
        say("no admin password configured: SimpleAuthManager generates one at first start")
        return None
    username = env.get("_AIRFLOW_WWW_USER_USERNAME") or users[0].split(":")[0]
    path = Path(path_text)
    try:
        passwords = json.loads(path.read_text(encoding="utf-8") or "{}")
    except FileNotFoundError:
        passwords = {}
    except json.JSONDecodeError:
        say(f"{path} was not valid JSON; rewriting it")
        passwords = {}
    passwords[username] = password
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(passwords) + "\n", encoding="utf-8")
    tmp.chmod(0o660)
    if uid and os.geteuid() == 0:
        os.chown(tmp, uid, 0)
    os.replace(tmp, path)
    say(f"login {username!r} written to {path}")
    return username


def _warehouse_url(env: Mapping[str, str]) -> str | None:
    """The URL of the warehouse's connection in the environment (`TOKOKITA_WAREHOUSE_URL`
    when there is none), or None."""
    from stack.connections import warehouse_url

    return warehouse_url(env) or env.get("TOKOKITA_WAREHOUSE_URL") or None


def _database_exists(url) -> bool:
    """Whether the PostgreSQL database of `url` exists on its server."""
    import psycopg

    server = url.set(drivername="postgresql", database="postgres", query={})
    with psycopg.connect(server.render_as_string(hide_password=False), autocommit=True,
                         connect_timeout=10) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            (url.database,)).fetchone() is not None


def warehouse_refusal(env: Mapping[str, str]) -> str | None:
    """Why the warehouse of `env` is refused (`runner.identity.refuse`: a watermark of some
    pipeline describes another one, or the one it describes is missing or an older copy), in
    one line naming both identities and the way out (`tokokita-etl state reconcile`); None
    when it is accepted. The package's own pipelines and the declared ones whose modules
    import here. Creates nothing."""
    url_text = _warehouse_url(env)
    if not url_text:
        return None
    from sqlalchemy.engine import make_url

    from stack.connections import pipeline_settings
    from tokokita_etl.errors import ConfigError
    from tokokita_etl.pipelines import PIPELINES, declared
    from tokokita_etl.runner.identity import (
        Presence,
        Present,
        WarehouseIdentityError,
        partition_tables,
        present,
        refuse,
    )
    from tokokita_etl.runner.stores import state_store
    from tokokita_etl.settings.model import default
    from tokokita_etl.warehouse.database import Warehouse

    url = make_url(url_text)
    warehouse = Warehouse(url_text, env.get("TOKOKITA_TIMEZONE") or default("timezone"))
    postgres = url.get_backend_name() == "postgresql" and bool(url.database)
    pipelines = list(PIPELINES.values())
    settings = pipeline_settings(env, cwd=Path.cwd())
    try:
        pipelines += declared(settings.declarations)
    except ConfigError as exc:
        say(f"the declared pipelines' watermarks are not checked here ({exc}); their first "
            "run checks them")
    found = Present(Presence.MISSING) if postgres and not _database_exists(url) \
        else present(warehouse, partition_tables(pipelines))
    watermarks = []
    for pipeline in pipelines:
        own = pipeline_settings(env, cwd=Path.cwd(), pipeline=pipeline)
        if own.state_db_url == own.warehouse_url and found.presence is Presence.MISSING:
            # the watermark is kept in the warehouse's database (`warehouse`, or its URL):
            # gone with it, or not made yet
            continue
        if own.state_conn_id and not own.state_url:
            say(f"the state database's connection {own.state_conn_id!r} is not in the "
                f"environment: the watermark of {pipeline.name} is not checked here; its "
                "first run checks it")
            continue
        store = state_store(own)
        watermarks.append((store.read(), store.location))
    try:
        refuse(settings, warehouse, found, watermarks)
    except WarehouseIdentityError as exc:
        return str(exc)
    return None


def check_warehouse(env: Mapping[str, str]) -> None:
    """Exit with `warehouse_refusal`'s line when the warehouse is refused: before anything
    is created."""
    if (refusal := warehouse_refusal(env)) is not None:
        raise SystemExit(f"[airflow-init] error: {refusal}")


def prepare_warehouse(env: Mapping[str, str]) -> str | None:
    """Create the warehouse database (PostgreSQL) when missing, then its tables (once
    `check_warehouse` accepted it)."""
    url_text = _warehouse_url(env)
    if not url_text:
        say("no warehouse connection in the environment (AIRFLOW_CONN_TOKOKITA_WAREHOUSE): "
            "its tables are made by the first load")
        return None
    from sqlalchemy.engine import make_url

    url = make_url(url_text)
    if url.get_backend_name() == "postgresql" and url.database and not _database_exists(url):
        import psycopg
        from psycopg import sql

        server = url.set(drivername="postgresql", database="postgres", query={})
        with psycopg.connect(server.render_as_string(hide_password=False), autocommit=True,
                             connect_timeout=10) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(url.database)))
        say(f"created warehouse database {url.database!r}")
    from tokokita_etl.pipelines import PIPELINES
    from tokokita_etl.settings.model import default
    from tokokita_etl.warehouse.database import Warehouse

    # the package's own pipelines' tables; a declared pipeline's module may be importable
    # only by the Airflow services (its first run creates its tables)
    for pipeline in PIPELINES.values():
        pipeline.declare_tables()
    warehouse = Warehouse(url_text, env.get("TOKOKITA_TIMEZONE") or default("timezone"))
    warehouse.ensure_schema()
    say(f"warehouse tables ready in {warehouse.display_url}")
    return warehouse.display_url


def date_runs_made_before_partitions(env: Mapping[str, str]) -> None:
    """`tokokita_airflow.upgrade` in Airflow's interpreter (importing Airflow's settings puts
    the plugins folder on the path, as for every Airflow process)."""
    code = ("import airflow.settings; from tokokita_airflow.upgrade import main; "
            "raise SystemExit(main())")
    python = str(Path(airflow_bin(env)).with_name("python"))
    if not Path(python).exists():
        python = sys.executable
    subprocess.run([python, "-c", code], check=True, env=dict(env))


def add_connections(env: Mapping[str, str]) -> list[str]:
    """With `TOKOKITA_INIT_ADD_CONNECTIONS=true`: add each `AIRFLOW_CONN_*` connection of `env`
    to Airflow's metadata database when it has none of that id, with Airflow's own model and
    session as `airflow connections add` does; return the ids added. Airflow reads its
    configuration from this process's environment, so `env` is that environment."""
    from stack.connections import ADD_CONNECTIONS_VAR, CONN_PREFIX

    if env.get(ADD_CONNECTIONS_VAR, "").strip().lower() != "true":
        return []
    values = {name.removeprefix(CONN_PREFIX).lower(): value for name, value in env.items()
              if name.startswith(CONN_PREFIX) and value}
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    added = []
    with create_session() as session:
        for conn_id, value in sorted(values.items()):
            if session.scalar(select(Connection.id).where(Connection.conn_id == conn_id)):
                say(f"connection {conn_id!r} is in the metadata database already: kept as it is")
                continue
            conn = (Connection.from_json(value, conn_id=conn_id) if value.lstrip().startswith("{")
                    else Connection(conn_id=conn_id, uri=value))
            session.add(conn)
            added.append(conn_id)
            say(f"connection {conn_id!r} (conn type {conn.conn_type}) added to the metadata "
                "database: Admin > Connections")
    return added


def main(env: Mapping[str, str] | None = None) -> int:
    """Run every init step; exit non-zero on the first failure."""
    env = dict(os.environ if env is None else env)
    check_warehouse(env)  # before anything is created
    uid = owner_uid(env)
    prepare_folders(env, uid)
    prepare_buckets(env)
    migrate(env)
    date_runs_made_before_partitions(env)
    write_login(env, uid)
    prepare_warehouse(env)
    add_connections(env)
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
