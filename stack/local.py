"""The compose services as local processes: the same command, the same environment.

Each service's command and environment are read from docker-compose.yaml (`stack.compose`);
only the values that cannot be the same outside a container are changed, and nothing else:

| in docker-compose.yaml                               | locally                                        |
|------------------------------------------------------|------------------------------------------------|
| bind mounts `./dags:/opt/airflow/dags`, ...          | the host folder (or the target's override,     |
|                                                      | e.g. a throw-away `data/` in tests)            |
| named volumes `airflow-logs`, `airflow-auth`         | `<airflow_home>/logs`, `<airflow_home>/auth`   |
| `/opt/airflow` itself (AIRFLOW_HOME, TOKOKITA_HOME)  | the target's `airflow_home`                    |
| `postgres:5432`, databases `airflow` and `tokokita`  | the target's database URLs (same driver)       |
| `airflow-apiserver:8080`, `localhost:8080`           | `127.0.0.1:<api port>` (a free port in tests)  |
| `localhost:8974` (scheduler health)                  | `127.0.0.1:<scheduler health port>`            |
| `AIRFLOW_UID` (compose variable)                     | the current uid                                |
| `object-store:5000`, `redis:6379` (also %-quoted in  | the target's `hosts`                           |
| an `AIRFLOW_CONN_*` URI)                             |                                                |

What the image provides is added: `AIRFLOW_HOME`, the api-server and scheduler health
ports and hosts (their container defaults, made explicit), `PATH` with this virtualenv first,
and the working directory (the image's /opt/airflow holds `stack/`, locally the repository).
A target's `extra_env` is applied last and is the only other difference (tests use it for
fast settings, and say so). A `TOKOKITA_*` variable that the compose file gives empty (its
generated block names every setting's variable) is left out: the settings skip an empty one
as unset.

Where the Airflow connections live is the target's `connections`: `"env"` as in the compose
file (every service gets the `AIRFLOW_CONN_*` variables), or `"metadata"` (the embedded stack
and the test stacks): airflow-init gets the variables and adds each connection to Airflow's
metadata database when it has none of that id (`TOKOKITA_INIT_ADD_CONNECTIONS=true`,
`stack.init`), and the Airflow services get them empty, as docs/configuration.md tells a compose
user to set them, so that Airflow reads the connections from its metadata database: listed and
editable in Admin > Connections, an edit read by the next task. Those services also get
`AIRFLOW__CORE__TEST_CONNECTION=Enabled`, the connection form's Test button.

The compose entrypoint's rule is kept: a command starting with `bash` or `python` runs as is,
anything else is an `airflow` sub-command.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from stack import COMPOSE_FILE, REPO
from stack.compose import AIRFLOW_SERVICES, INIT_SERVICE, Service, services
from stack.connections import ADD_CONNECTIONS_VAR, CONN_PREFIX

CONTAINER_HOME = "/opt/airflow"
COMPOSE_DB_HOST = "postgres"
COMPOSE_API = ("airflow-apiserver:8080", "localhost:8080")
COMPOSE_SCHEDULER_HEALTH = "localhost:8974"
SETTINGS_PREFIX = "TOKOKITA_"
PASSTHROUGH = ("HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "USER", "LOGNAME", "TERM")
BIN = Path(sys.executable).parent
#: where a target's Airflow connections live (`LocalTarget.connections`)
CONNECTIONS_IN_ENV, CONNECTIONS_IN_METADATA = "env", "metadata"

_DB_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+._-]*)://(?:[^@/]*@)?" + COMPOSE_DB_HOST
                     + r"(?::\d+)?/(?P<db>[A-Za-z0-9_]+)(?P<query>\?.*)?$")
_SQLITE_SCHEMES = {"postgresql+psycopg": "sqlite", "postgresql+psycopg_async": "sqlite+aiosqlite",
                   "db+postgresql": "db+sqlite"}


@dataclass
class LocalTarget:
    """Where and how the services run locally.

    :param airflow_home: what /opt/airflow is (AIRFLOW_HOME; named volumes go below it).
    :param databases: compose database name (`airflow`, `tokokita`) -> local SQLAlchemy URL.
    :param mounts: container path -> host path, overriding the compose bind mounts.
    :param compose_env: the variables compose would interpolate (shell env / `.env`).
    :param extra_env: applied last; anything here is NOT from the compose file.
    :param hosts: compose `host:port` -> local `host:port` of the other services (redis, the
        object store) that run outside this stack.
    :param service_homes: a service's own /opt/airflow (a worker on a machine of its own:
        nothing of it is shared with the other services but the mounted code).
    :param service_env: per service, applied after `extra_env` (NOT from the compose file).
    :param connections: `"env"`: the compose file's `AIRFLOW_CONN_*` variables for every
        service; `"metadata"`: added to Airflow's metadata database by airflow-init, empty for
        the Airflow services (see the module docstring).
    """

    airflow_home: Path
    databases: dict[str, str]
    api_port: int
    scheduler_health_port: int
    mounts: dict[str, Path] = field(default_factory=dict)
    compose_env: dict[str, str] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    hosts: dict[str, str] = field(default_factory=dict)
    service_homes: dict[str, Path] = field(default_factory=dict)
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)
    host: str = "127.0.0.1"
    connections: str = CONNECTIONS_IN_ENV

    def __post_init__(self) -> None:
        if self.connections not in (CONNECTIONS_IN_ENV, CONNECTIONS_IN_METADATA):
            raise ValueError(f"connections must be {CONNECTIONS_IN_ENV!r} or "
                             f"{CONNECTIONS_IN_METADATA!r}, got {self.connections!r}")

    def home_of(self, service: str) -> Path:
        """What /opt/airflow is for `service`."""
        return self.service_homes.get(service, self.airflow_home)

    @property
    def api_url(self) -> str:
        """Base URL of the api-server."""
        return f"http://{self.host}:{self.api_port}"

    def interpolation_env(self) -> dict[str, str]:
        """Compose variables: the target's, with AIRFLOW_UID = the current uid."""
        return {**self.compose_env, "AIRFLOW_UID": str(os.getuid())}


def _local_db_url(value: str, target: LocalTarget) -> str | None:
    """The local equivalent of a compose database URL (None when `value` is not one)."""
    match = _DB_URL.match(value)
    if not match:
        return None
    from sqlalchemy.engine import make_url

    scheme, db = match.group("scheme"), match.group("db")
    if db not in target.databases:
        raise KeyError(f"no local database for compose database {db!r} (in {value!r})")
    local = make_url(target.databases[db])
    if local.get_backend_name() == "sqlite":
        path = local.database
        if scheme == "postgresql":  # an AIRFLOW_CONN_* URI: JSON is unambiguous for SQLite
            return json.dumps({"conn_type": "sqlite", "host": path})
        return f"{_SQLITE_SCHEMES.get(scheme, 'sqlite')}:///{path}"
    rendered = local.set(drivername=scheme).render_as_string(hide_password=False)
    return rendered


class Localiser:
    """Rewrites compose values for a local target (see the module docstring)."""

    def __init__(self, target: LocalTarget, service: Service) -> None:
        self.target = target
        home = target.home_of(service.name)
        mounts: dict[str, str] = {CONTAINER_HOME: str(home)}
        for volume in service.volumes:
            if volume.named:
                mounts[volume.target] = str(home / Path(volume.target).name)
            else:
                mounts[volume.target] = volume.source
        # an override replaces a mount the service declares; a folder it does not mount stays
        # inside its own home
        mounts.update({k: str(v) for k, v in target.mounts.items()
                       if any(volume.target == k for volume in service.volumes)})
        # longest container path first, so /opt/airflow/data wins over /opt/airflow
        self.mounts = dict(sorted(mounts.items(), key=lambda kv: -len(kv[0])))
        self._path = re.compile(
            "(" + "|".join(re.escape(k) for k in self.mounts) + r")(?=/|:|$|\s|['\"])")

    def value(self, value: str) -> str:
        """One environment value or command argument, localised."""
        url = _local_db_url(value, self.target)
        if url is not None:
            return url
        for api in COMPOSE_API:
            value = value.replace(api, f"{self.target.host}:{self.target.api_port}")
        for compose_host, local_host in self.target.hosts.items():
            value = value.replace(compose_host, local_host)
            # inside an AIRFLOW_CONN_* URI's query (an endpoint_url extra) it is %-quoted
            value = value.replace(quote(compose_host, safe=""), quote(local_host, safe=""))
        value = value.replace(COMPOSE_SCHEDULER_HEALTH,
                              f"{self.target.host}:{self.target.scheduler_health_port}")
        return self._path.sub(lambda m: self.mounts[m.group(1)], value)


def service_env(service: Service, target: LocalTarget) -> dict[str, str]:
    """The environment of `service` as a local process."""
    loc = Localiser(target, service)
    env = {k: os.environ[k] for k in PASSTHROUGH if k in os.environ}
    env["PATH"] = os.pathsep.join([str(BIN), os.environ.get("PATH", "/usr/bin:/bin")])
    # an empty TOKOKITA_* variable is one the settings skip, as if unset: left out, so that a
    # setting nobody gave is in no process's environment (the compose file's generated block
    # names every setting's variable, empty unless set)
    env.update({key: loc.value(value) for key, value in service.environment.items()
                if value or not key.startswith(SETTINGS_PREFIX)})
    env.update({
        "AIRFLOW_HOME": str(target.home_of(service.name)),
        "AIRFLOW__API__HOST": target.host,
        "AIRFLOW__API__PORT": str(target.api_port),
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": target.host,
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(target.scheduler_health_port),
    })
    if target.connections == CONNECTIONS_IN_METADATA:
        if service.name == INIT_SERVICE:
            env[ADD_CONNECTIONS_VAR] = "true"
        else:
            env.update({name: "" for name in env if name.startswith(CONN_PREFIX)})
            env["AIRFLOW__CORE__TEST_CONNECTION"] = "Enabled"
    env.update(target.extra_env)
    env.update(target.service_env.get(service.name, {}))
    return env


def service_argv(service: Service) -> list[str]:
    """The command as the official image's entrypoint runs it."""
    command = list(service.command)
    if not command:
        raise ValueError(f"service {service.name} has no command")
    if command[0] == "bash":
        return ["/bin/bash", *command[1:]]
    if command[0] == "python":
        return [sys.executable, *command[1:]]
    if command[0] == "airflow":
        command = command[1:]
    return [str(BIN / "airflow"), *command]


def healthcheck_argv(service: Service, target: LocalTarget) -> list[str] | None:
    """The service's compose healthcheck as a local command."""
    if not service.healthcheck:
        return None
    loc = Localiser(target, service)
    kind, *args = service.healthcheck
    args = [loc.value(a) for a in args]
    if kind == "CMD-SHELL":
        return ["/bin/sh", "-c", " ".join(args)]
    if kind == "CMD":
        return args
    return None


@dataclass
class Proc:
    """A started service."""

    name: str
    pid: int
    log: Path
    popen: subprocess.Popen | None = None
    create_time: float = 0.0


class StackError(RuntimeError):
    """The local stack did not start or is not healthy."""


class LocalStack:
    """Start, check and stop the Airflow services of docker-compose.yaml as local processes."""

    def __init__(self, target: LocalTarget, *, compose_file: Path = COMPOSE_FILE,
                 names: tuple[str, ...] = AIRFLOW_SERVICES, log_dir: Path | None = None) -> None:
        self.target = target
        self.compose_file = compose_file
        self.services = services(compose_file, target.interpolation_env())
        self.names = names
        self.log_dir = log_dir or target.airflow_home / "stack-logs"
        self.procs: list[Proc] = []

    def env(self, name: str) -> dict[str, str]:
        """Local environment of service `name`."""
        return service_env(self.services[name], self.target)

    def argv(self, name: str) -> list[str]:
        """Local command of service `name`."""
        return service_argv(self.services[name])

    def init(self, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run the airflow-init service to completion (raises with its output on failure)."""
        self.target.airflow_home.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(self.argv(INIT_SERVICE), env=self.env(INIT_SERVICE), cwd=REPO,
                                capture_output=True, text=True, timeout=timeout, check=False)
        if result.returncode != 0:
            raise StackError(f"{INIT_SERVICE} failed (exit {result.returncode}):\n"
                             f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
        return result

    def start(self, names: tuple[str, ...] | None = None) -> None:
        """Start every service (or those of `names`) in its own session, output to
        `<log_dir>/<service>.log`."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for name in self.names if names is None else names:
            log_path = self.log_dir / f"{name}.log"
            with open(log_path, "ab") as log:
                popen = subprocess.Popen(self.argv(name), env=self.env(name), cwd=REPO,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            self.procs.append(Proc(name, popen.pid, log_path, popen, _create_time(popen.pid)))

    def dead(self) -> list[Proc]:
        """Services whose process has exited."""
        return [p for p in self.procs if not is_alive(p)]

    def log_tail(self, chars: int = 3000) -> str:
        """The end of every service log, for error messages."""
        parts = []
        for proc in self.procs:
            text = proc.log.read_text(errors="replace") if proc.log.exists() else ""
            parts.append(f"--- {proc.name} (pid {proc.pid}) ---\n{text[-chars:]}")
        return "\n".join(parts)

    def health(self) -> dict[str, Any] | None:
        """`GET /api/v2/monitor/health`, or None when the api-server does not answer."""
        import httpx

        try:
            response = httpx.get(f"{self.target.api_url}/api/v2/monitor/health", timeout=5)
        except httpx.HTTPError:
            return None
        return response.json() if response.status_code == 200 else None

    def wait_healthy(self, timeout: float = 180, poll: float = 1.0) -> dict[str, Any]:
        """Poll the health endpoint until the database and every component are healthy."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            if dead := self.dead():
                raise StackError(f"{', '.join(p.name for p in dead)} exited\n{self.log_tail()}")
            last = self.health()
            if last and all((last.get(part) or {}).get("status") == "healthy"
                            for part in ("metadatabase", "scheduler", "triggerer",
                                         "dag_processor")):
                return last
            time.sleep(poll)
        raise StackError(f"not healthy after {timeout:.0f}s: {last}\n{self.log_tail()}")

    def healthchecks(self, timeout: float = 120) -> dict[str, subprocess.CompletedProcess]:
        """Run each service's compose healthcheck once, locally."""
        results = {}
        for name in self.names:
            argv = healthcheck_argv(self.services[name], self.target)
            if argv:
                results[name] = subprocess.run(argv, env=self.env(name), cwd=REPO,
                                               capture_output=True, text=True, timeout=timeout,
                                               check=False)
        return results

    def processes(self) -> list[Any]:
        """psutil processes of the stack: each service and all its descendants."""
        import psutil

        found = []
        for proc in self.procs:
            try:
                root = psutil.Process(proc.pid)
                found.extend([root, *root.children(recursive=True)])
            except psutil.NoSuchProcess:
                continue
        return found

    def memory(self) -> dict[str, int]:
        """Sum of RSS and of PSS (shared pages split between processes) over the stack."""
        import psutil

        rss = pss = count = 0
        for process in self.processes():
            with contextlib.suppress(psutil.Error):
                info = process.memory_full_info()
                rss += info.rss
                pss += getattr(info, "pss", info.rss)
                count += 1
        return {"rss": rss, "pss": pss, "processes": count}

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM each service's process group, then SIGKILL what is left."""
        stop_procs(self.procs, timeout)
        self.procs = []

    def proc(self, name: str) -> Proc:
        """The started process of service `name` (KeyError when it is not running)."""
        for proc in self.procs:
            if proc.name == name and is_alive(proc):
                return proc
        raise KeyError(f"service {name} is not running")

    def stop_service(self, name: str, timeout: float = 30) -> None:
        """Stop one service as `docker compose stop` does: SIGTERM to its process group, then
        SIGKILL after `timeout`; the others go on."""
        proc = self.proc(name)
        stop_procs([proc], timeout)
        self.procs.remove(proc)

    def kill_service(self, name: str) -> None:
        """SIGKILL one service's whole process group at once (`docker kill`, a machine that
        loses power): nothing of it gets to clean up."""
        proc = self.proc(name)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        stop_procs([proc], timeout=10)  # reaps it; nothing is left to get the SIGTERM
        self.procs.remove(proc)

    def restart_service(self, name: str, timeout: float = 30) -> None:
        """`docker compose restart <name>`: stop the service, then start it again with the
        same command and environment (its log goes on in the same file)."""
        self.stop_service(name, timeout)
        self.start((name,))

    def state(self) -> dict[str, Any]:
        """What `make down` needs to stop a detached stack."""
        return {"api_url": self.target.api_url,
                "procs": [{"name": p.name, "pid": p.pid, "log": str(p.log),
                           "create_time": p.create_time} for p in self.procs]}


def _create_time(pid: int) -> float:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def is_alive(proc: Proc) -> bool:
    if proc.popen is not None:
        return proc.popen.poll() is None
    import psutil

    try:
        process = psutil.Process(proc.pid)
        return (process.is_running() and process.status() != psutil.STATUS_ZOMBIE
                and (not proc.create_time or abs(process.create_time() - proc.create_time) < 1))
    except psutil.Error:
        return False


def _group_members(pgid: int) -> list[int]:
    import psutil

    members = []
    for process in psutil.process_iter(["pid"]):
        with contextlib.suppress(OSError, psutil.Error):
            if os.getpgid(process.info["pid"]) == pgid:
                members.append(process.info["pid"])
    return members


def stop_procs(procs: list[Proc], timeout: float = 30) -> None:
    """Stop the given service processes and everything in their process groups."""
    groups = [p.pid for p in procs if is_alive(p)]
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_group_members(g) for g in groups):
        for p in procs:
            if p.popen is not None:
                p.popen.poll()
        time.sleep(0.3)
    for pgid in groups:
        if _group_members(pgid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
    for p in procs:
        if p.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.popen.wait(timeout=5)


def write_state(path: Path, stack: LocalStack) -> None:
    """Record a detached stack's processes (for `make down`)."""
    path.write_text(json.dumps(stack.state(), indent=2) + "\n", encoding="utf-8")


def read_state(path: Path) -> list[Proc]:
    """The processes recorded by `write_state` (empty when there is no record)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    return [Proc(p["name"], int(p["pid"]), Path(p["log"]), None, float(p["create_time"]))
            for p in data.get("procs", [])]

