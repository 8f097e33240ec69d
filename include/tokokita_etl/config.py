"""Settings: built-in defaults < YAML file < environment variables < explicit overrides.

Every setting is a field of `Settings`; its environment variable is `TOKOKITA_<NAME>`. Each
value is checked where it is read (`_coerce`), so an error names the setting and its source.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tokokita_etl.contract import DEFAULT_TIMEZONE
from tokokita_etl.cron import CronError, parse
from tokokita_etl.errors import ConfigError
from tokokita_etl.storage import Location, file_size, is_url

DEFAULT_CONFIG_PATH = Path("config/pipeline.yaml")
#: the TOKOKITA_* variables the local Airflow stack (`make up`, `make demo`) gives its
#: services, written when it starts; the command line run in the project folder reads them
#: beneath the environment, so that both see one set of settings
STACK_SETTINGS_FILE = Path("airflow_home/tokokita.env")
ENV_PREFIX = "TOKOKITA_"


def _cron_problem(expr: str) -> str | None:
    try:
        parse(expr)
    except CronError as exc:
        return str(exc)
    return None


def _timezone_problem(name: str) -> str | None:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {name!r}"
    return None


# DuckDB's memory_limit: a number and a unit (K, KB, KiB ... T, TB, TiB) or a share of the RAM
_DUCKDB_SIZE = re.compile(r"[0-9]+(\.[0-9]+)?\s*([KMGT](i?B)?|%)", re.IGNORECASE)


def _duckdb_size_problem(size: str) -> str | None:
    if _DUCKDB_SIZE.fullmatch(size.strip()):
        return None
    return f"expected a DuckDB size such as 400MB, 2GB or 1GiB, got {size!r}"


def _local_time_problem(text: str) -> str | None:
    if re.fullmatch(r"[0-9]{2}:[0-9]{2}", text):
        hours, minutes = int(text[:2]), int(text[3:])
        if hours < 24 and minutes < 60:
            return None
    return f"expected a local time HH:MM (00:00 to 23:59), got {text!r}"


def _url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return None
    return f"expected an http:// or https:// URL, got {url!r}"


def _notifiers_problem(text: str) -> str | None:
    from tokokita_etl.notify import parse_notifiers

    try:
        parse_notifiers(text)
    except ValueError as exc:
        return str(exc)
    return None


def _state_url_problem(url: str) -> str | None:
    if url == "warehouse" or urlsplit(url).scheme.split("+")[0] in ("postgresql", "postgres"):
        return None
    return f"expected empty, 'warehouse' or a postgresql:// URL, got {url!r}"


@dataclass(frozen=True)
class Settings:
    """Resolved pipeline settings; paths are absolute."""

    pipeline: str = "etl-pesanan-tokokita"
    cron: str = field(default="30 2 * * *", metadata={"problem": _cron_problem})
    timezone: str = field(default=DEFAULT_TIMEZONE, metadata={"problem": _timezone_problem})
    lookback_days: int = 7
    max_attempts: int = 3
    raw_dir: Location = Path("data/raw")
    gold_dir: Location = Path("data/gold")
    quarantine_dir: Location = Path("data/quarantine")
    state_dir: Path = Path("data/state")
    staging_dir: Location = Path("data/staging")
    #: this machine's working copies of the object-storage folders (a local folder)
    work_dir: Path = Path("data/work")
    warehouse_url: str = "sqlite:///data/warehouse/tokokita.db"
    #: where the watermark, the claims and the manifests live: empty for files in
    #: `state_dir`; a `postgresql://` URL, or `warehouse` for the warehouse's own PostgreSQL
    #: database (schema `tokokita_state`), for workers on several machines
    state_url: str = field(default="", metadata={"problem": _state_url_problem, "empty": True})
    #: inside Airflow: the Airflow connection the warehouse is read from (its URL then
    #: replaces `warehouse_url`); empty: `warehouse_url` inside Airflow too
    warehouse_conn_id: str = field(default="tokokita_warehouse", metadata={"empty": True})
    #: inside Airflow: the connection of a separate PostgreSQL state database; empty: the
    #: state follows `state_url` (`warehouse`: the warehouse's connection)
    state_conn_id: str = field(default="", metadata={"empty": True})
    #: inside Airflow: the connection the object-storage folders (s3:// URLs) are reached
    #: with (key, secret; the endpoint in its extras, as the Amazon provider reads it)
    object_storage_conn_id: str = field(default="aws_default", metadata={"empty": True})
    #: DuckDB's own memory in transform; beyond it its temp tables spill to the staging folder
    #: (with the rest of the process this bounds a large partition's peak RSS)
    duckdb_memory_limit: str = field(default="400MB", metadata={"problem": _duckdb_size_problem})
    #: how long after its scheduled fire time a run waits for its partition file
    wait_window_hours: int = 6
    #: how long a run's claim on a date holds before another run may take the date over
    claim_ttl_hours: int = 6
    #: the DAG's catch-up window: an ISO 8601 date (its midnight) or date-time, in `timezone`
    #: unless it has an offset
    start_date: date = date(2026, 11, 1)
    end_date: date | None = None
    #: a run whose valid rows are below this share of the trailing median is reported
    volume_min_share: float = field(default=0.5, metadata={"range": (0.0, 1.0)})
    #: `warn`, or `fail`: a low-volume or zero-row run fails validation
    volume_check: str = field(default="warn", metadata={"choices": ("warn", "fail")})
    #: an http(s) URL to ping after each run; empty: none
    ping_url: str = field(default="", metadata={"problem": _url_problem, "empty": True})
    #: the scheduled run for D must have succeeded by this local time (HH:MM, in `timezone`)
    #: on its fire date, else the DAG's deadline alert fires
    deadline_local_time: str = field(default="06:00",
                                     metadata={"problem": _local_time_problem})
    #: an http(s) URL the deadline alert POSTs JSON to; empty: the alert is only logged
    deadline_webhook_url: str = field(default="",
                                      metadata={"problem": _url_problem, "empty": True})
    #: Airflow notifiers for the alerts, as JSON: a list of {"class": import path of a
    #: BaseNotifier, "kwargs": {...}, "on": [events]} (`notify.parse_notifiers`); empty: none
    #: besides `ping_url` and `deadline_webhook_url`
    notifiers: str = field(default="", metadata={"problem": _notifiers_problem, "empty": True})
    #: seconds to wait for the warehouse to accept a connection (PostgreSQL connect_timeout)
    db_connect_timeout_s: int = 10
    #: seconds one warehouse statement may run (PostgreSQL statement_timeout): above the
    #: longest legitimate statement (the fact COPY: 21 s at 5M rows, docs/configuration.md)
    db_statement_timeout_s: int = 600
    #: seconds the client waits for any answer of the server (a result, room to write, a
    #: fetched batch) before it closes the connection: a frozen or silent server fails the
    #: run after this; above the longest silence of a legitimate run (docs/configuration.md)
    db_answer_timeout_s: int = 45
    #: seconds to wait for a warehouse lock (PostgreSQL lock_timeout, SQLite busy timeout)
    db_lock_timeout_s: int = 60

    def replace(self, **changes) -> Settings: return dataclasses.replace(self, **changes)

    @property
    def tz(self) -> ZoneInfo:
        """The pipeline's time zone."""
        return ZoneInfo(self.timezone)

    @property
    def state_db_url(self) -> str:
        """The PostgreSQL URL of the state store, or "" for the files in `state_dir`."""
        return self.warehouse_url if self.state_url == "warehouse" else self.state_url

    @property
    def state_file(self) -> Path:
        """The watermark file."""
        return self.state_dir / "state.json"

    @property
    def runs_dir(self) -> Path:
        """Where run manifests go."""
        return self.state_dir / "runs"

    def partition_path(self, day: date) -> Location:
        """The raw partition file for `day`."""
        return partition_path(self.raw_dir, day)

    def gold_path(self, day: date) -> Location:
        """The published gold file for `day`."""
        return gold_path(self.gold_dir, day)

    def quarantine_path(self, day: date) -> Location:
        """The quarantine file for `day`."""
        return join(self.quarantine_dir, f"karantina_{day.isoformat()}.csv")

    def staging_path(self, day: date) -> Path:
        """The local hand-off folder between the stages of a run for `day`: in `staging_dir`,
        or this machine's working copy of it when `staging_dir` is a URL."""
        if is_url(self.staging_dir):
            return self.work_dir / "staging" / day.isoformat()
        return Path(self.staging_dir) / day.isoformat()

    def staging_url(self, day: date) -> str | None:
        """Where the stages of `day` hand over between machines (None: a local folder)."""
        return join(self.staging_dir, day.isoformat()) if is_url(self.staging_dir) else None


_FIELDS = {f.name: f for f in fields(Settings)}


def env_var(name: str) -> str:
    """The environment variable of setting `name`: `TOKOKITA_<NAME>`."""
    return f"{ENV_PREFIX}{name.upper()}"


#: environment variable -> setting name
ENV_VARS = {env_var(name): name for name in _FIELDS}
PATH_SETTINGS = tuple(name for name, setting in _FIELDS.items()
                      if setting.type in ("Path", "Location"))
#: what the DAG file reads, from the environment only, when it is parsed
DAG_PARSE_SETTINGS = ("cron", "timezone", "start_date", "end_date", "wait_window_hours",
                      "deadline_local_time", "deadline_webhook_url", "notifiers")


def join(location: Location, name: str) -> Location:
    """`name` inside the folder `location` (a Path for a local folder, a URL for a URL)."""
    if is_url(location):
        return f"{str(location).rstrip('/')}/{name}"
    return Path(location) / name


def partition_path(raw_dir: Location, day: date) -> Location:
    """`<raw_dir>/pesanan_YYYY-MM-DD.csv`."""
    return join(raw_dir, f"pesanan_{day.isoformat()}.csv")


def partition_file_exists(path: Location) -> bool:
    """Whether a partition file is there: it exists and is non-empty (a file, or an object
    when `path` is a URL)."""
    if is_url(path):
        return bool(file_size(path))
    try:
        path = Path(path)
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def partition_exists(raw_dir: Location, day: date) -> bool:
    """Whether partition `day` is there (`partition_file_exists` of its exact file)."""
    return partition_file_exists(partition_path(raw_dir, day))


def gold_path(gold_dir: Location, day: date) -> Location:
    """`<gold_dir>/summary_harian_YYYY-MM-DD.csv`."""
    return join(gold_dir, f"summary_harian_{day.isoformat()}.csv")


def _url_folder_problem(url: str) -> str | None:
    import fsspec

    scheme = url.split("://", 1)[0]
    if scheme not in fsspec.available_protocols():
        return f"unknown storage scheme {scheme!r} in {url!r}"
    return None


def _coerce(name: str, value: Any, source: str) -> Any:
    """`value` of setting `name` read from `source`, as the setting's type; ConfigError if it
    is not one."""
    setting = _FIELDS[name]
    kind, rules = setting.type, setting.metadata

    def bad(problem: str) -> ConfigError:
        return ConfigError(f"{source}: {name} {problem}")

    if kind == "int":
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise bad(f"must be an integer, got {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise bad(f"must be an integer, got {value!r}") from None
        if number < 1:
            raise bad(f"must be >= 1, got {number}")
        return number
    if kind == "float":
        low, high = rules["range"]
        try:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
        except (TypeError, ValueError):
            raise bad(f"must be a number from {low:g} to {high:g}, got {value!r}") from None
        if not (math.isfinite(number) and low <= number <= high):
            raise bad(f"must be from {low:g} to {high:g}, got {value!r}")
        return number
    if kind in ("date", "date | None"):
        return _coerce_date(value, optional=kind != "date", bad=bad)
    if kind in ("Path", "Location"):
        if not isinstance(value, str | os.PathLike) or not str(value):
            raise bad(f"must be a non-empty path, got {value!r}")
        if isinstance(value, str) and "://" in value:
            if kind == "Path":
                raise bad(f"must be a local folder, got the URL {value!r}")
            if problem := _url_folder_problem(value):
                raise bad(problem)
            return value.rstrip("/")
        return Path(value)
    if not isinstance(value, str) or not (value or rules.get("empty")):
        raise bad(f"must be a non-empty string, got {value!r}")
    if value and "choices" in rules and value not in rules["choices"]:
        raise bad(f"must be one of {', '.join(rules['choices'])}, got {value!r}")
    if value and "problem" in rules and (problem := rules["problem"](value)):
        raise ConfigError(f"{source}: {name}: {problem}")
    return value


def _coerce_date(value: Any, *, optional: bool, bad: Callable[[str], ConfigError]) -> date | None:
    """A date, or a date-time for a bound inside a day (naive: wall time in `timezone`)."""
    if optional and value in (None, ""):
        return None
    if isinstance(value, date):  # YAML reads unquoted dates and date-times itself
        return value
    if isinstance(value, str):
        for parse in (date.fromisoformat, datetime.fromisoformat):
            try:
                return parse(value.strip())
            except ValueError:
                pass
    expected = "an ISO 8601 date or date-time" + (" (or empty)" if optional else "")
    raise bad(f"must be {expected}, got {value!r}")


def catchup_bound(bound: date, tz: str) -> datetime:
    """A catch-up bound as an aware datetime: a date is its midnight in `tz`, a naive
    date-time is wall time in `tz`, an aware one keeps its instant."""
    zone = ZoneInfo(tz)
    if not isinstance(bound, datetime):
        return datetime.combine(bound, time(), tzinfo=zone)
    if bound.tzinfo is None:
        return bound.replace(tzinfo=zone)
    return bound.astimezone(zone)


def _check_together(settings: Settings, sources: Mapping[str, str], *,
                    in_airflow: bool = False) -> None:
    """The rules that involve more than one setting (`in_airflow`: the warehouse of a
    `warehouse_conn_id` is checked once its connection is read, by the Airflow adapter)."""
    if settings.state_url == "warehouse" and not settings.warehouse_url.startswith("postgres") \
            and not (in_airflow and settings.warehouse_conn_id):
        raise ConfigError(
            f"state_url 'warehouse' ({sources.get('state_url', 'default')}) needs a PostgreSQL "
            f"warehouse_url, got {settings.warehouse_url!r}; the state of the embedded SQLite "
            "setup stays in state_dir (leave state_url empty)")
    if settings.end_date is not None and (
            catchup_bound(settings.end_date, settings.timezone)
            < catchup_bound(settings.start_date, settings.timezone)):
        raise ConfigError(
            f"end_date {settings.end_date.isoformat()} ({sources.get('end_date', 'default')}) is "
            f"before start_date {settings.start_date.isoformat()} "
            f"({sources.get('start_date', 'default')})")


def stack_environment(cwd: Path | None = None) -> dict[str, str]:
    """The non-empty TOKOKITA_* variables of the local Airflow stack of the project folder
    `cwd` (`STACK_SETTINGS_FILE`), or {} when it has none."""
    path = (Path.cwd() if cwd is None else Path(cwd)) / STACK_SETTINGS_FILE
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {name: value for name, value in dotenv_values(path).items()
            if name.startswith("TOKOKITA_") and value}


def load_settings(
    config_path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
    in_airflow: bool = False,
) -> Settings:
    """Resolve settings from defaults, the YAML file, the environment and overrides
    (`in_airflow`: for the Airflow adapter, which reads the warehouse of `warehouse_conn_id`
    from its connection afterwards)."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def put(name: str, value: Any, source: str) -> None:
        values[name] = _coerce(name, value, source)
        sources[name] = source

    explicit = config_path or env.get("TOKOKITA_CONFIG")
    path = Path(explicit) if explicit else DEFAULT_CONFIG_PATH
    if not path.is_absolute():
        path = cwd / path
    if path.exists():
        loaded = _read_yaml(path)
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: config must be a mapping of settings")
        for key, value in loaded.items():
            if key not in _FIELDS:
                raise ConfigError(f"{path}: unknown setting {key!r}; known: {sorted(_FIELDS)}")
            put(key, value, str(path))
    elif explicit:
        raise ConfigError(f"{path}: config file not found")

    for var, name in ENV_VARS.items():
        if env.get(var):
            put(name, env[var], var)
    for name, value in (overrides or {}).items():
        if value is not None:
            put(name, value, f"--{name.replace('_', '-')}")

    settings = replace(Settings(), **values)
    _check_together(settings, sources, in_airflow=in_airflow)
    resolved = {name: _absolute(getattr(settings, name), cwd) for name in PATH_SETTINGS}
    return replace(settings, warehouse_url=_absolute_sqlite_url(settings.warehouse_url, cwd),
                   **resolved)


def _read_yaml(path: Path) -> Any:
    """The YAML file's content; dates and date-times stay text, so that `_coerce` reads them
    and a bad one is an error naming its setting."""
    import yaml  # only when a file is read: the DAG file imports this module at parse time

    class TextDatesLoader(yaml.SafeLoader):
        yaml_implicit_resolvers: ClassVar[dict] = {
            first: [(tag, pattern) for tag, pattern in resolvers
                    if tag != "tag:yaml.org,2002:timestamp"]
            for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    try:
        content = path.read_text(encoding="utf-8")
        return yaml.load(content, Loader=TextDatesLoader) or {}  # noqa: S506 (a SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None


def _absolute(path: Location, cwd: Path) -> Location:
    return path if is_url(path) or Path(path).is_absolute() else cwd / path


def _absolute_sqlite_url(url: str, cwd: Path) -> str:
    """Make a relative `sqlite:///rel/path.db` URL absolute against `cwd`."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and url != prefix:
        rel = url[len(prefix):]
        if rel != ":memory:":
            return prefix + str(cwd / rel)
    return url


@dataclass(frozen=True)
class DagSchedule:
    """What the DAG needs when it is parsed: schedule, zone, catch-up window, wait window."""

    cron: str
    timezone: str
    #: the catch-up window as aware datetimes in `timezone`
    start_date: datetime
    end_date: datetime | None
    #: how long after its fire time a scheduled run waits for its partition file
    wait_window: timedelta
    #: the local time (in `timezone`) by which a scheduled run must have succeeded
    deadline_local_time: time = time(6, 0)
    #: where the deadline alert POSTs; empty: log only
    deadline_webhook_url: str = ""
    #: the `notifiers` setting (JSON), for the deadline alert
    notifiers: str = ""


def dag_schedule_from_env(env: Mapping[str, str] | None = None) -> DagSchedule:
    """The DAG's `DAG_PARSE_SETTINGS`, validated like `load_settings` does: environment only
    (`TOKOKITA_CRON`, `TOKOKITA_TIMEZONE`, `TOKOKITA_START_DATE`, `TOKOKITA_END_DATE`,
    `TOKOKITA_WAIT_WINDOW_HOURS`, `TOKOKITA_DEADLINE_LOCAL_TIME`,
    `TOKOKITA_DEADLINE_WEBHOOK_URL`, `TOKOKITA_NOTIFIERS`), no file read; the defaults equal
    config/pipeline.yaml.
    """
    env = os.environ if env is None else env
    values, sources = {}, {}
    for name in DAG_PARSE_SETTINGS:
        var = env_var(name)
        if env.get(var):
            values[name] = _coerce(name, env[var], var)
            sources[name] = var
    settings = replace(Settings(), **values)
    _check_together(settings, sources)
    return DagSchedule(
        cron=settings.cron, timezone=settings.timezone,
        start_date=catchup_bound(settings.start_date, settings.timezone),
        end_date=catchup_bound(settings.end_date, settings.timezone) if settings.end_date else None,
        wait_window=timedelta(hours=settings.wait_window_hours),
        deadline_local_time=time.fromisoformat(settings.deadline_local_time),
        deadline_webhook_url=settings.deadline_webhook_url,
        notifiers=settings.notifiers,
    )
