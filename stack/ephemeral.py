"""A throw-away running Airflow: the compose services as local processes.

`EphemeralStack` creates two PostgreSQL databases (`airflow_e2e_<id>` for Airflow's metadata,
`tokokita_e2e_<id>` for the warehouse), a home folder, runs the compose file's airflow-init
command, starts api-server, scheduler, dag-processor and triggerer with the environment the
compose file declares (`stack.local` says which few values differ locally), and tears it all
down again: processes by their process group, databases dropped, even after a failure. The
end-to-end tests (tests/e2e) and the catch-up benchmark (bench/catchup_stack.py) use it.

Settings for throw-away stacks only, and nothing else, come on top of the compose
environment (`FAST_ENV` and the cluster policy in `LOCAL_SETTINGS`).

The warehouse and the object store are Airflow connections kept in Airflow's metadata
database, as on the embedded stack: added by airflow-init from the compose file's
`AIRFLOW_CONN_*` variables, which the Airflow services get empty (`connections="metadata"`,
the default, `stack.local`), or created through the REST API before the scheduler starts
(`connections="rest"`: the variables empty for airflow-init too); or, as the compose file
gives them, the variables themselves (`connections="env"`). With the first two the
connection form's Test button is enabled. No Airflow service gets a warehouse URL or an AWS
variable. The warehouse database may live on a PostgreSQL server of its own
(`warehouse_server`, e.g. one that checks passwords).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time
import uuid
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from dotenv import dotenv_values

from stack import REPO
from stack.compose import AIRFLOW_SERVICES, INIT_SERVICE
from stack.local import (
    CONNECTIONS_IN_ENV,
    CONNECTIONS_IN_METADATA,
    LocalStack,
    LocalTarget,
    Proc,
    StackError,
    stop_procs,
)
from stack.ports import free_port
from stack.rest import AirflowApi
from tokokita_etl.orders.pipeline import ORDERS
from tokokita_etl.settings.model import default

DAG_ID = ORDERS.dag_id
#: the object store's connection id (the `object_storage_conn_id` default)
OBJECT_STORE = default("object_storage_conn_id")
USERNAME = "airflow"  # the compose file's default _AIRFLOW_WWW_USER_USERNAME / _PASSWORD
PASSWORD = "airflow"  # noqa: S105

#: throw-away stack only: the city reports' catch-ups start after the stack is gone (a test
#: of a report gives its own `TOKOKITA_<REPORT>__START_DATE`)
NO_WEEKLY_CATCHUP, NO_MONTHLY_CATCHUP = "2100-01-04", "2100-01-01"
#: the variables that keep both catch-ups away
NO_REPORT_CATCHUPS = {"TOKOKITA_WEEKLY_CITY_REPORT__START_DATE": NO_WEEKLY_CATCHUP,
                      "TOKOKITA_MONTHLY_CITY_REPORT__START_DATE": NO_MONTHLY_CATCHUP}

#: throw-away stack only (NOT from docker-compose.yaml): no periodic re-parse of the
#: unchanged DAG file while the stack runs (it costs CPU on a 2-core runner)
FAST_ENV = {
    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
}

#: throw-away stack only: a cluster policy in the home's config/ folder (Airflow puts it on
#: sys.path); the DAG's 1-minute retry_delay, doubled for the second retry, would make a
#: failing date wait 3 minutes for its two retries
LOCAL_SETTINGS = '''"""Throw-away stacks only: retry failed TokoKita tasks after {seconds} s, not 1 min."""
from datetime import timedelta


def task_policy(task):
    if task.dag_id == {dag_id!r}:
        task.retry_delay = timedelta(seconds={seconds})
'''


#: the scale-out profile's settings, as users apply them (`--env-file config/scale-out.env`)
SCALE_OUT_ENV = REPO / "config" / "scale-out.env"
#: the two Celery workers of the compose file's `celery` profile
WORKERS = ("airflow-worker", "airflow-worker-2")


def env_file(path: Path) -> dict[str, str]:
    """The `KEY=VALUE` settings of a compose env file (python-dotenv: comments, quotes and
    `${VAR}` as compose reads them; a bare `KEY` without a value sets nothing)."""
    return {key: value for key, value in dotenv_values(path).items() if value is not None}


def pg_server_url() -> str:
    """The test PostgreSQL server (TOKOKITA_TEST_PG_URL, default the local trust server)."""
    return os.environ.get("TOKOKITA_TEST_PG_URL") or \
        "postgresql+psycopg://postgres@127.0.0.1:5432/tokokita_test"


def admin_conninfo(server: str | None = None) -> str:
    """The libpq conninfo of the `postgres` database of `server` (default `pg_server_url()`)."""
    from sqlalchemy.engine import make_url

    url = make_url(server or pg_server_url()).set(drivername="postgresql", database="postgres",
                                                  query={})
    return url.render_as_string(hide_password=False)


def db_url(name: str, server: str | None = None) -> str:
    """The SQLAlchemy URL of database `name` on `server` (default `pg_server_url()`)."""
    from sqlalchemy.engine import make_url

    url = make_url(server or pg_server_url()).set(database=name, query={})
    return url.render_as_string(hide_password=False)


class MemorySampler(threading.Thread):
    """Samples the stack's memory every `interval` seconds; keeps the peak."""

    def __init__(self, stack: LocalStack, interval: float = 1.0) -> None:
        super().__init__(daemon=True, name="e2e-memory")
        self.stack = stack
        self.interval = interval
        self.peak = {"rss": 0, "pss": 0, "processes": 0}
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            with contextlib.suppress(Exception):
                sample = self.stack.memory()
                for key in self.peak:
                    self.peak[key] = max(self.peak[key], sample[key])
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)


class EphemeralStack:
    """The local stack with throw-away databases, home and data folder."""

    def __init__(self, root: Path, *, start_date: str, end_date: str | None,
                 tokokita_env: dict[str, str] | None = None,
                 extra_users: dict[str, str] | None = None, celery: bool = False,
                 connections: str = "metadata", warehouse_server: str | None = None,
                 retry_delay_s: int = 1, sample_memory: bool = False) -> None:
        self.root = root
        self.id = uuid.uuid4().hex[:10]
        self.metadata_db = f"airflow_e2e_{self.id}"
        self.warehouse_db = f"tokokita_e2e_{self.id}"
        self.home = root / "home"
        self.data = root / "data"
        self.celery = celery
        self.retry_delay_s = retry_delay_s  # LOCAL_SETTINGS
        if connections not in ("metadata", "rest", "env"):
            raise ValueError(f"connections must be 'metadata', 'rest' or 'env', got {connections!r}")
        #: the SQLAlchemy URL of the warehouse database's server (default: the metadata's)
        self.warehouse_server = warehouse_server or pg_server_url()
        compose_env = {"TOKOKITA_START_DATE": start_date, "TOKOKITA_END_DATE": end_date or "",
                       # the city reports' catch-ups only where a test asks for them
                       **NO_REPORT_CATCHUPS,
                       **(env_file(SCALE_OUT_ENV) if celery else {}),
                       **(tokokita_env or {})}
        self.redis_port, self.object_store_port = free_port(), free_port()
        self.target = LocalTarget(
            airflow_home=self.home,
            databases={"airflow": db_url(self.metadata_db),
                       "tokokita": db_url(self.warehouse_db, self.warehouse_server)},
            api_port=free_port(),
            scheduler_health_port=free_port(),
            # the compose bind mounts ./data and ./config, pointed at throw-away copies
            mounts={"/opt/airflow/data": self.data, "/opt/airflow/config": self.home / "config"},
            compose_env=compose_env,
            extra_env=dict(FAST_ENV),
            # the profile's redis and object store: local servers of this stack alone
            hosts={"redis:6379": f"127.0.0.1:{self.redis_port}",
                   "object-store:5000": f"127.0.0.1:{self.object_store_port}"},
            connections=CONNECTIONS_IN_METADATA if connections == "metadata"
            else CONNECTIONS_IN_ENV,
        )
        if celery:
            for number, worker in enumerate(WORKERS, start=1):
                # each worker is a machine of its own: its own /opt/airflow (working copy,
                # logs, config file); on one host they need their own log-server port, and
                # the second reports its IP address as its host name so that task instances
                # tell the two apart (Airflow's own hostname_callable choices)
                self.target.service_homes[worker] = root / f"worker-{number}"
                self.target.service_env[worker] = {
                    "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                    "HOSTNAME": socket.gethostname()}  # as a container has it (healthcheck)
            self.target.service_env[WORKERS[1]]["AIRFLOW__CORE__HOSTNAME_CALLABLE"] = \
                "airflow.utils.net.get_host_ip_address"
        if extra_users:  # more SimpleAuthManager logins (name: role); Airflow generates
            # their passwords at the api-server's first start (`password(name)` reads them)
            self.target.extra_env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = ",".join(
                [f"{USERNAME}:admin", *(f"{name}:{role}" for name, role in extra_users.items())])
        from stack.connections import CONN_PREFIX, env_connections

        self.connections_via = connections
        names = AIRFLOW_SERVICES + (WORKERS if celery else ())
        #: the stack's Airflow connections (id -> airflow.sdk Connection): the compose file's,
        #: as airflow-init gets them
        self.connections = env_connections(LocalStack(self.target, names=names)
                                           .env(INIT_SERVICE))
        if connections == "rest":  # defined through the REST API instead (`start`)
            self.target.compose_env.update({f"{CONN_PREFIX}{conn_id.upper()}": ""
                                            for conn_id in self.connections})
            # the connection form's Test button, as on the "metadata" stacks
            self.target.extra_env["AIRFLOW__CORE__TEST_CONNECTION"] = "Enabled"
        self.stack = LocalStack(self.target, names=names)
        self.helpers: list[Proc] = []  # redis and the object store (celery profile)
        self.api = AirflowApi(self.target.api_url, USERNAME, PASSWORD)
        #: sample the stack's memory every second (`peak_memory`); off unless asked: reading
        #: each process's PSS costs the test process about 3 CPU-s a minute
        self.sample_memory = sample_memory
        self.sampler: MemorySampler | None = None
        self.timings: dict[str, float] = {}
        self._created_dbs: list[tuple[str, str]] = []  # (server URL, database)

    # -- lifecycle --------------------------------------------------------------------

    def prepare(self) -> None:
        """Databases, folders and the airflow-init service (nothing is running after it)."""
        import psycopg

        (self.data / "raw").mkdir(parents=True, exist_ok=True)
        if self.celery:
            self._start_helpers()
        shutil.copytree(REPO / "config", self.home / "config")
        (self.home / "config" / "airflow_local_settings.py").write_text(
            LOCAL_SETTINGS.format(seconds=self.retry_delay_s, dag_id=DAG_ID))
        with psycopg.connect(admin_conninfo(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{self.metadata_db}"')
            self._created_dbs.append((pg_server_url(), self.metadata_db))
        if self.connections_via == "rest":  # airflow-init has no connection to read
            with psycopg.connect(admin_conninfo(self.warehouse_server), autocommit=True,
                                 connect_timeout=10) as conn:
                conn.execute(f'CREATE DATABASE "{self.warehouse_db}"')
        self._created_dbs.append((self.warehouse_server, self.warehouse_db))  # or airflow-init
        started = time.monotonic()
        self.stack.init()
        self.timings["init_s"] = time.monotonic() - started
        if self.connections_via == "rest" and self.celery:  # the buckets, as airflow-init
            from stack.connections import CONN_PREFIX, as_json
            from stack.init import prepare_buckets
            from tokokita_etl.storage import use_options

            conn = self.connections[OBJECT_STORE]
            prepare_buckets({**self.service_env(),
                             f"{CONN_PREFIX}{OBJECT_STORE.upper()}": as_json(conn)})
            use_options("s3", None)

    def _start_helpers(self) -> None:
        """Redis and the S3-compatible object store, as local processes on free ports."""
        self.start_helper("redis")
        self.start_helper("object-store")

    def start_helper(self, name: str) -> None:
        """Start `redis` or `object-store` on its port (again, after `stop_helper`: redis
        keeps its data in memory only, so it comes back empty; the object store comes back
        with its objects, as a real one does: `devtools.object_store`'s `keep`)."""
        import subprocess

        from devtools.object_store import start_server
        from stack.rest import wait_for

        logs = self.root / "helper-logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{name}.log"
        if name == "redis":  # no persistence: a restarted redis has lost its queues
            redis = [shutil.which("redis-server") or "redis-server", "--bind", "127.0.0.1",
                     "--port", str(self.redis_port), "--save", "", "--appendonly", "no"]
            with open(log, "ab") as out:
                popen = subprocess.Popen(redis, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            self.helpers.append(Proc(name, popen.pid, log, popen))
            wait_for(lambda: _answers(self.redis_port), 30, 0.2, "redis to listen")
        elif name == "object-store":
            popen = start_server(self.object_store_port, log, new_session=True,
                                 keep=self.root / "object-store.pickle")
            self.helpers.append(Proc(name, popen.pid, log, popen))
        else:
            raise KeyError(f"no helper service {name!r} (redis, object-store)")

    def stop_helper(self, name: str, *, kill: bool = False) -> None:
        """Stop `redis` or `object-store` (SIGTERM, or SIGKILL with `kill`; the object store
        keeps its objects on SIGTERM only); the stack goes on without it until
        `start_helper`."""
        import signal

        proc = next(p for p in self.helpers if p.name == name)
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        stop_procs([proc])
        self.helpers.remove(proc)

    def task_process(self, run_id: str, task_id: str):
        """The process running a task instance's current try on a Celery worker, as psutil
        sees it: the task runner, whose title Airflow sets to `airflow worker -- <TI id>`;
        its parent is the worker's pool process that supervises it (None while no worker
        runs it)."""
        import psutil

        ti = self.api.task_instances(DAG_ID, run_id)[task_id]
        title = f"airflow worker -- {ti['id']}"
        for process in self.stack.processes():
            with contextlib.suppress(psutil.Error):
                if title in " ".join(process.cmdline()):
                    return process
        return None

    def worker_of(self, process) -> str:
        """The Celery worker service whose process tree holds `process`."""
        import psutil

        for proc in self.stack.procs:
            with contextlib.suppress(psutil.Error):
                tree = psutil.Process(proc.pid).children(recursive=True)
                if any(child.pid == process.pid for child in tree):
                    return proc.name
        raise LookupError(f"process {process.pid} belongs to no service of the stack")

    def storage_env(self) -> dict[str, str]:
        """The AWS environment of the stack's object store, from its connection, for this
        process (empty without an object store)."""
        from stack.connections import aws_env, storage_options

        if not self.celery:
            return {}
        return aws_env(storage_options(self.service_env(), self.connections))

    def start(self, timeout: float = 180) -> None:
        """Start the services and wait until the health endpoint reports them healthy; with
        `connections="rest"` the api-server first, and the connections are created through
        its REST API before the others start."""
        started = time.monotonic()
        if self.connections_via == "rest":
            self.stack.start(("airflow-apiserver",))
            self.create_connections(timeout)
            self.stack.start(tuple(n for n in self.stack.names if n != "airflow-apiserver"))
        else:
            self.stack.start()
        if self.sample_memory:
            self.sampler = MemorySampler(self.stack)
            self.sampler.start()
        self.stack.wait_healthy(timeout)
        self.timings["healthy_s"] = time.monotonic() - started

    def create_connections(self, timeout: float = 180) -> None:
        """`POST /api/v2/connections` of each of the stack's connections, once the
        api-server lets the admin log in."""
        from stack.connections import rest_body
        from stack.rest import ApiError, wait_for

        def logged_in() -> bool:
            if self.stack.dead():
                raise StackError(f"the api-server exited\n{self.stack.log_tail()}")
            try:
                return bool(self.api.login())
            except (ApiError, OSError, httpx.HTTPError):
                return False

        wait_for(logged_in, timeout, 0.5, "the api-server to accept the login")
        for conn in self.connections.values():
            self.api.create_connection(rest_body(conn))

    def environments(self) -> dict[str, dict[str, str]]:
        """The environment of every process of the stack (`<service>/<pid>` -> variables),
        as the kernel holds it (/proc/<pid>/environ)."""
        import psutil

        found = {}
        names = {p.pid: p.name for p in self.stack.procs}
        for proc in self.stack.procs:
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(proc.pid)
                for process in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        found[f"{names.get(process.pid, proc.name)}/{process.pid}"] = \
                            process.environ()
        return found

    def close(self) -> None:
        """Stop every process, drop the databases (safe to call after any failure)."""
        try:
            if self.sampler:
                self.sampler.stop()
            self.api.close()
        finally:
            try:
                self.stack.stop()
            finally:
                try:
                    stop_procs(self.helpers)
                finally:
                    self._drop_databases()

    def _drop_databases(self) -> None:
        import psycopg

        for server, name in self._created_dbs:
            with psycopg.connect(admin_conninfo(server), autocommit=True,
                                 connect_timeout=10) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    # -- what tests and benchmarks look at --------------------------------------------

    def service_env(self, name: str = "airflow-scheduler") -> dict[str, str]:
        """A service's local environment (for the `airflow` CLI and the pipeline's settings)."""
        return self.stack.env(name)

    def password(self, username: str) -> str:
        """A login's password from SimpleAuthManager's password file."""
        import json

        path = self.service_env("airflow-apiserver")[
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
        return json.loads(Path(path).read_text(encoding="utf-8"))[username]

    def settings(self, pipeline: Any = None):
        """The settings the tasks of `pipeline` (default: the orders) see (the warehouse of the
        stack's connection)."""
        from stack.connections import pipeline_settings

        env = self.service_env()
        return pipeline_settings(env, cwd=Path(env["TOKOKITA_HOME"]),
                                 connections=self.connections, pipeline=pipeline)

    def watermark(self, pipeline: Any = None) -> dict[str, Any]:
        """The watermark's runs by date of `pipeline` (default: the orders; empty before the
        first run)."""
        from tokokita_etl.runner.stores import state_store

        return state_store(self.settings(pipeline)).read().runs

    def warehouse_dates(self) -> set[str]:
        """Dates with rows in the warehouse's daily summary."""
        import psycopg

        conninfo = db_url(self.warehouse_db, self.warehouse_server).replace(
            "postgresql+psycopg://", "postgresql://")
        with psycopg.connect(conninfo, connect_timeout=10) as conn:
            rows = conn.execute("SELECT DISTINCT order_date FROM summary_harian").fetchall()
        return {str(row[0]) for row in rows}

    @contextlib.contextmanager
    def object_store(self):
        """This process's AWS environment pointed at the stack's object store, for the block."""
        saved = {k: os.environ.get(k) for k in self.storage_env()}
        os.environ.update(self.storage_env())
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def write_raw(self, day: date, data: bytes) -> None:
        """Drop the raw partition of `day` where the tasks look for it (folder or bucket)."""
        from tokokita_etl.orders.contract import partition_path
        from tokokita_etl.storage import is_url

        path = partition_path(self.settings().raw_dir, day)
        if not is_url(path):
            Path(path).write_bytes(data)
            return
        from tokokita_etl.storage import filesystem

        with self.object_store():
            fs, key = filesystem(str(path))
            fs.pipe_file(key, data)

    def read_raw(self, day: date) -> bytes | None:
        """The raw partition of `day` (None when there is none)."""
        from tokokita_etl.orders.contract import partition_path

        return self._read(partition_path(self.settings().raw_dir, day))

    def gold(self, day: date) -> bytes | None:
        """The published gold file of `day` (None when there is none)."""
        from tokokita_etl.orders.contract import gold_path

        return self._read(gold_path(self.settings().gold_dir, day))

    def _read(self, location) -> bytes | None:
        from tokokita_etl.storage import is_url

        if not is_url(location):
            return Path(location).read_bytes() if Path(location).exists() else None
        from tokokita_etl.storage import filesystem

        with self.object_store():
            fs, key = filesystem(str(location))
            try:
                return fs.cat_file(key)
            except FileNotFoundError:
                return None

    def gold_dates(self) -> set[str]:
        """Dates with a published gold file."""
        from tokokita_etl.storage import is_url

        gold = self.settings().gold_dir
        if not is_url(gold):
            names = [p.name for p in Path(gold).glob("summary_harian_*.csv")]
        else:
            from tokokita_etl.storage import names as object_names

            with self.object_store():
                names = object_names(str(gold))
        return {name.removesuffix(".csv").removeprefix("summary_harian_") for name in names
                if name.startswith("summary_harian_")}

    def manifests(self, day: date) -> list[dict[str, Any]]:
        """The run manifests of `day`, oldest first."""
        from tokokita_etl.runner.stores import state_store

        return list(reversed(list(state_store(self.settings()).manifests(day))))

    def task_log(self, run_id: str, task_id: str, attempt: int = 1) -> str:
        """The log file of one try of a task, from whichever home (service or worker) ran it."""
        pattern = (f"logs/dag_id={DAG_ID}/run_id={run_id}/task_id={task_id}/"
                   f"attempt={attempt}.log")
        found = [path for home in (self.home, *self.target.service_homes.values())
                 if (path := home / pattern).exists()]
        if len(found) != 1:
            raise FileNotFoundError(f"{pattern}: found {len(found)} times under {self.root}")
        return found[0].read_text(encoding="utf-8")

    def peak_memory(self) -> dict[str, int]:
        """Peak of the stack's summed RSS and PSS so far."""
        return dict(self.sampler.peak) if self.sampler else {}


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def dag_settings():
    """The settings the DAG file reads when it is parsed (the repository's config file and
    this process's environment), for its schedule and zone."""
    from tokokita_etl.pipelines import load_settings

    return load_settings(cwd=REPO)


def partition_day(run: dict[str, Any]) -> date:
    """D of a run: its partition key, else (a manual run triggered without one) the package's
    rule on when it was queued, in the DAG's zone."""
    from tokokita_etl.runner.schedule import partition_date_for_run

    if run.get("partition_key"):
        return date.fromisoformat(run["partition_key"])
    anchor = datetime.fromisoformat((run["logical_date"] or run["run_after"]).replace("Z", "+00:00"))
    return partition_date_for_run(anchor, dag_settings().timezone)


def last_fired_day(now: datetime) -> date:
    """D of the latest scheduled run that has fired at `now`, in the DAG's zone."""
    from tokokita_etl.runner.schedule import local_today

    today = local_today(now, dag_settings().timezone)
    # the run of T-1 fires at T 02:30; leave the scheduler two minutes of slack around it
    fired = now >= fire_time(today - timedelta(days=1)) + timedelta(minutes=2)
    return today - timedelta(days=1 if fired else 2)


def fire_time(day: date) -> datetime:
    """The scheduled fire time of partition `day` (D+1 02:30 by default), as the DAG's schedule."""
    from tokokita_etl.runner.schedule import fire_time_for_partition

    settings = dag_settings()
    return fire_time_for_partition(day, settings.cron, settings.timezone)
