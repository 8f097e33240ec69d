"""Settings: one pydantic-settings class, `Settings`, with its sources in order of precedence:
explicit values (command-line flags) > `TOKOKITA_<NAME>` environment variables > (the command
line only) the local Airflow stack's `airflow_home/tokokita.env` > the YAML file
(config/pipeline.yaml or $TOKOKITA_CONFIG) > the class defaults.

The command line, the tasks and the DAG file (when it is parsed) all read them through
`load_settings`. Each value is checked by its field's validator, and an error names the setting
and the source it came from (the file, the variable or the flag); every loaded `Settings`
records where each of its values came from (`Settings.source`, `tokokita-etl config`).
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import cache
from pathlib import Path
from typing import Annotated, Any, ClassVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import PlainValidator, PrivateAttr, ValidationError, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, InitSettingsSource, SettingsConfigDict

from tokokita_etl.cron import CronError, parse
from tokokita_etl.errors import ConfigError
from tokokita_etl.masking import mask_url, masked_arguments
from tokokita_etl.storage import Location, file_size, is_url

DEFAULT_CONFIG_PATH = Path("config/pipeline.yaml")
#: the TOKOKITA_* variables the local Airflow stack (`make up`, `make demo`) gives its
#: services, written when it starts; the command line run in the project folder reads them
#: beneath the environment, so that both see one set of settings
STACK_SETTINGS_FILE = Path("airflow_home/tokokita.env")
ENV_PREFIX = "TOKOKITA_"
#: the source of a value nobody set
DEFAULT_SOURCE = "default"
#: the source of a value given to `Settings.replace`
REPLACE_SOURCE = "Settings.replace"


# -- the value rules: each raises `_rule` ("<name> <text>") or `_problem` ("<name>: <text>") --

def _rule(text: str) -> PydanticCustomError:
    return PydanticCustomError("tokokita_rule", "{text}", {"text": text})


def _problem(text: str) -> PydanticCustomError:
    return PydanticCustomError("tokokita_problem", "{text}", {"text": text})


def _count(value: Any, maximum: int | None = None) -> int:
    """A whole number >= 1 (a YAML true or 2.5 is not one), at most `maximum`."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise _rule(f"must be an integer, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise _rule(f"must be an integer, got {value!r}") from None
    if number < 1:
        raise _rule(f"must be >= 1, got {number}")
    if maximum is not None and number > maximum:
        raise _rule(f"must be <= {maximum}, got {number}")
    return number


def _share(value: Any) -> float:
    """A number from 0 to 1."""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        raise _rule(f"must be a number from 0 to 1, got {value!r}") from None
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        raise _rule(f"must be from 0 to 1, got {value!r}")
    return number


def _catchup_date(value: Any, *, optional: bool = False) -> date | None:
    """A date, or a date-time for a bound inside a day (naive: wall time in `timezone`)."""
    if optional and value in (None, ""):
        return None
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        for parse_iso in (date.fromisoformat, datetime.fromisoformat):
            try:
                return parse_iso(value.strip())
            except ValueError:
                pass
    expected = "an ISO 8601 date or date-time" + (" (or empty)" if optional else "")
    raise _rule(f"must be {expected}, got {value!r}")


def _url_folder_problem(url: str) -> str | None:
    import fsspec

    scheme = url.split("://", 1)[0]
    if scheme not in fsspec.available_protocols():
        return f"unknown storage scheme {scheme!r} in {url!r}"
    return None


def _folder(value: Any, *, urls: bool = True) -> Location:
    """A local folder (a Path) or, when `urls`, an object-storage URL (a str, no trailing /)."""
    if not isinstance(value, str | os.PathLike) or not str(value):
        raise _rule(f"must be a non-empty path, got {value!r}")
    try:
        # the folder is written into messages, manifests and the watermark, which are UTF-8
        os.fspath(value).encode("utf-8")
    except UnicodeEncodeError:
        raise _rule(f"must be a path in UTF-8, got {value!r}") from None
    if isinstance(value, str) and "://" in value:
        if not urls:
            raise _rule(f"must be a local folder, got the URL {value!r}")
        if problem := _url_folder_problem(value):
            raise _rule(problem)
        return value.rstrip("/")
    return Path(value)


def _text(*, empty: bool = False, choices: tuple[str, ...] = (),
          problem: Callable[[str], str | None] | None = None) -> PlainValidator:
    """A string setting: non-empty unless `empty`, one of `choices`, no `problem`."""

    def check(value: Any) -> str:
        if not isinstance(value, str) or not (value or empty):
            raise _rule(f"must be a non-empty string, got {value!r}")
        if value and choices and value not in choices:
            raise _rule(f"must be one of {', '.join(choices)}, got {value!r}")
        if value and problem and (found := problem(value)):
            raise _problem(found)
        return value

    return PlainValidator(check)


def _cron_problem(expr: str) -> str | None:
    try:
        parse(expr)
    except CronError as exc:
        return str(exc)
    return None


#: files of the zone folder that ZoneInfo opens but that name no zone of the database (the
#: ones `zoneinfo.available_timezones` leaves out, and the host's `localtime` link); DuckDB
#: rejects them. Checked by name: `available_timezones` walks the folder, 0.05 s a call.
_NOT_ZONES = re.compile(r"(posixrules|localtime|(posix|right)/.*)", re.IGNORECASE)


def _timezone_problem(name: str) -> str | None:
    if _NOT_ZONES.fullmatch(name):
        return f"unknown time zone {name!r} (a file of the zone folder, not a zone's name)"
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
    from tokokita_etl.runner.notify import parse_notifiers

    try:
        parse_notifiers(text)
    except ValueError as exc:
        return str(exc)
    return None


def _state_url_problem(url: str) -> str | None:
    if url == "warehouse" or urlsplit(url).scheme.split("+")[0] in ("postgresql", "postgres"):
        return None
    return f"expected empty, 'warehouse' or a postgresql:// URL, got {url!r}"


Count = Annotated[int, PlainValidator(_count)]
#: a span of dates or hours that dates and clocks are moved by: bounded so that the moved
#: date stays a date (a lookback of a million days or a claim of 10^8 hours overflowed)
MAX_DAYS = 36_600  # about a hundred years
MAX_HOURS = 8_784  # a leap year
Days = Annotated[int, PlainValidator(lambda value: _count(value, maximum=MAX_DAYS))]
Hours = Annotated[int, PlainValidator(lambda value: _count(value, maximum=MAX_HOURS))]
Share = Annotated[float, PlainValidator(_share)]
CatchupDate = Annotated[date, PlainValidator(_catchup_date)]
OptionalCatchupDate = Annotated[date | None, PlainValidator(
    lambda value: _catchup_date(value, optional=True))]
Folder = Annotated[Location, PlainValidator(_folder)]
LocalFolder = Annotated[Path, PlainValidator(lambda value: _folder(value, urls=False))]
Text = Annotated[str, _text()]
OptionalText = Annotated[str, _text(empty=True)]
HttpUrl = Annotated[str, _text(empty=True, problem=_url_problem)]


# -- the sources ------------------------------------------------------------------------------

class _Layer(InitSettingsSource):
    """One source of settings values (`values`: setting name -> raw value), and the label each
    value's errors and `Settings.source` name: `origin(name)`."""

    def __init__(self, settings_cls: type[BaseSettings], values: Mapping[str, Any],
                 origin: Callable[[str], str]) -> None:
        super().__init__(settings_cls, dict(values))
        self.values = dict(values)
        self.origin = origin


@dataclass(frozen=True)
class _Load:
    """What one `load_settings` (or `replace`) call reads, while it validates."""

    #: the sources below the explicit values, highest precedence first
    layers: tuple[_Layer, ...]
    #: setting name -> where its value comes from (absent: the default)
    origins: Mapping[str, str]
    #: read for the Airflow adapter, which takes the warehouse of `warehouse_conn_id` from
    #: its connection afterwards (and checks it then)
    in_airflow: bool = False


_LOADING: ContextVar[_Load | None] = ContextVar("tokokita_settings_loading", default=None)


@contextmanager
def _loading(load: _Load) -> Iterator[None]:
    token = _LOADING.set(load)
    try:
        yield
    finally:
        _LOADING.reset(token)


def _origin(name: str) -> str:
    load = _LOADING.get()
    return (load.origins if load else {}).get(name, DEFAULT_SOURCE)


class Settings(BaseSettings):
    """The pipeline's settings; `load_settings` resolves the paths (absolute) and records the
    source of each value. Immutable: `replace` makes a validated copy."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid", env_prefix=ENV_PREFIX)

    pipeline: Text = "etl-pesanan-tokokita"
    cron: Annotated[str, _text(problem=_cron_problem)] = "30 2 * * *"
    #: the pipeline's time zone: partition dates are its dates
    timezone: Annotated[str, _text(problem=_timezone_problem)] = "Asia/Jakarta"
    lookback_days: Days = 7
    max_attempts: Count = 3
    raw_dir: Folder = Path("data/raw")
    gold_dir: Folder = Path("data/gold")
    quarantine_dir: Folder = Path("data/quarantine")
    state_dir: LocalFolder = Path("data/state")
    staging_dir: Folder = Path("data/staging")
    #: this machine's working copies of the object-storage folders (a local folder)
    work_dir: LocalFolder = Path("data/work")
    warehouse_url: Text = "sqlite:///data/warehouse/tokokita.db"
    #: where the watermark, the claims and the manifests live: empty for files in
    #: `state_dir`; a `postgresql://` URL, or `warehouse` for the warehouse's own PostgreSQL
    #: database (the first schema of its search_path), for workers on several machines
    state_url: Annotated[str, _text(empty=True, problem=_state_url_problem)] = ""
    #: inside Airflow: the Airflow connection the warehouse is read from (its URL then
    #: replaces `warehouse_url`); empty: `warehouse_url` inside Airflow too
    warehouse_conn_id: OptionalText = "tokokita_warehouse"
    #: inside Airflow: the connection of a separate PostgreSQL state database; empty: the
    #: state follows `state_url` (`warehouse`: the warehouse's connection)
    state_conn_id: OptionalText = ""
    #: inside Airflow: the connection the object-storage folders (s3:// URLs) are reached
    #: with (key, secret; the endpoint in its extras, as the Amazon provider reads it)
    object_storage_conn_id: OptionalText = "aws_default"
    #: DuckDB's own memory in transform; beyond it its temp tables spill to the staging folder
    #: (with the rest of the process this bounds a large partition's peak RSS)
    duckdb_memory_limit: Annotated[str, _text(problem=_duckdb_size_problem)] = "400MB"
    #: how long after its scheduled fire time a run waits for its partition file
    wait_window_hours: Hours = 6
    #: how long a run's claim on a date holds before another run may take the date over
    claim_ttl_hours: Hours = 6
    #: the DAG's catch-up window: an ISO 8601 date (its midnight) or date-time, in `timezone`
    #: unless it has an offset
    start_date: CatchupDate = date(2026, 11, 1)
    end_date: OptionalCatchupDate = None
    #: a run whose valid rows are below this share of the trailing median is reported
    volume_min_share: Share = 0.5
    #: `warn`, or `fail`: a low-volume or zero-row run fails validation
    volume_check: Annotated[str, _text(choices=("warn", "fail"))] = "warn"
    #: an http(s) URL to ping after each run; empty: none
    ping_url: HttpUrl = ""
    #: the scheduled run for D must have succeeded by this local time (HH:MM, in `timezone`)
    #: on its fire date, else the DAG's deadline alert fires
    deadline_local_time: Annotated[str, _text(problem=_local_time_problem)] = "06:00"
    #: an http(s) URL the deadline alert POSTs JSON to; empty: the alert is only logged
    deadline_webhook_url: HttpUrl = ""
    #: Airflow notifiers for the alerts, as JSON: a list of {"class": import path of a
    #: BaseNotifier, "kwargs": {...}, "on": [events]} (`notify.parse_notifiers`); empty: none
    #: besides `ping_url` and `deadline_webhook_url`
    notifiers: Annotated[str, _text(empty=True, problem=_notifiers_problem)] = ""
    #: seconds to wait for the warehouse to accept a connection (PostgreSQL connect_timeout)
    db_connect_timeout_s: Count = 10
    #: seconds one warehouse statement may run (PostgreSQL statement_timeout): above the
    #: longest legitimate statement (the fact COPY: 21 s at 5M rows, docs/configuration.md)
    db_statement_timeout_s: Count = 600
    #: seconds the client waits for any answer of the server (a result, room to write, a
    #: fetched batch) before it closes the connection: a frozen or silent server fails the
    #: run after this; above the longest silence of a legitimate run (docs/configuration.md)
    db_answer_timeout_s: Count = 45
    #: seconds to wait for a warehouse lock (PostgreSQL lock_timeout, SQLite busy timeout)
    db_lock_timeout_s: Count = 60

    #: setting name -> where its value came from (absent: the default)
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings,
                                   dotenv_settings, file_secret_settings):
        """Explicit values, then the sources `load_settings` reads (environment, the stack's
        file, the YAML file); `Settings(...)` alone reads none: its values and the defaults."""
        load = _LOADING.get()
        return (init_settings, *(load.layers if load else ()))

    @model_validator(mode="after")
    def check_together(self) -> Settings:
        """The rules that involve more than one setting."""
        load = _LOADING.get()
        connection_later = load is not None and load.in_airflow and bool(self.warehouse_conn_id)
        if self.state_url == "warehouse" and not self.warehouse_url.startswith("postgres") \
                and not connection_later:
            raise _together(
                f"state_url 'warehouse' ({_origin('state_url')}) needs a PostgreSQL "
                f"warehouse_url, got {self.warehouse_url!r}; the state of the embedded SQLite "
                "setup stays in state_dir (leave state_url empty)")
        if self.end_date is not None and self.catchup_end < self.catchup_start:
            raise _together(
                f"end_date {self.end_date.isoformat()} ({_origin('end_date')}) is before "
                f"start_date {self.start_date.isoformat()} ({_origin('start_date')})")
        return self

    def __eq__(self, other: object) -> bool:
        """Equal values (wherever they came from)."""
        return type(other) is type(self) and self.__dict__ == other.__dict__

    def replace(self, **changes: Any) -> Settings:
        """A copy with `changes` (setting name -> value), validated as any source is; an error
        names the setting and `Settings.replace`. Paths are taken as given."""
        origins = {**self._origins, **dict.fromkeys(changes, REPLACE_SOURCE)}
        with _loading(_Load(layers=(), origins=origins)):
            copy = _validated(lambda: type(self).model_validate({**self.__dict__, **changes}))
        copy._origins = origins
        return copy

    def source(self, name: str) -> str:
        """Where the value of setting `name` came from: `default`, the YAML file's path, the
        environment variable (`TOKOKITA_<NAME>`), the stack's file, or the `--flag`."""
        if name not in type(self).model_fields:
            raise KeyError(name)
        return self._origins.get(name, DEFAULT_SOURCE)

    @property
    def tz(self) -> ZoneInfo:
        """The pipeline's time zone."""
        return ZoneInfo(self.timezone)

    @property
    def catchup_start(self) -> datetime:
        """`start_date` as an aware datetime in `timezone` (`catchup_bound`)."""
        return catchup_bound(self.start_date, self.timezone)

    @property
    def catchup_end(self) -> datetime | None:
        """`end_date` as an aware datetime in `timezone`, or None for no end."""
        return None if self.end_date is None else catchup_bound(self.end_date, self.timezone)

    @property
    def wait_window(self) -> timedelta:
        """`wait_window_hours` as a duration."""
        return timedelta(hours=self.wait_window_hours)

    @property
    def deadline_time(self) -> time:
        """`deadline_local_time` as a time of day."""
        return time.fromisoformat(self.deadline_local_time)

    @property
    def state_db_url(self) -> str:
        """The PostgreSQL URL of the state store, or "" for the files in `state_dir`."""
        return self.warehouse_url if self.state_url == "warehouse" else self.state_url

    @property
    def state_file(self) -> Path:
        """The watermark file."""
        return self.state_dir / "state.json"

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


def _together(text: str) -> PydanticCustomError:
    return PydanticCustomError("tokokita_together", "{text}", {"text": text})


#: setting name -> its field (annotation, default)
SETTINGS = Settings.model_fields


def default(name: str) -> Any:
    """The class default of setting `name`."""
    return SETTINGS[name].default


def env_var(name: str) -> str:
    """The environment variable of setting `name`: `TOKOKITA_<NAME>` (the class's prefix)."""
    return f"{Settings.model_config['env_prefix']}{name.upper()}"


def flag(name: str) -> str:
    """The command-line flag of setting `name`: `--<name-with-dashes>`."""
    return f"--{name.replace('_', '-')}"


#: environment variable -> setting name
ENV_VARS = {env_var(name): name for name in SETTINGS}
#: the folder settings, resolved against the working directory
PATH_SETTINGS = tuple(name for name, setting in SETTINGS.items()
                      if setting.annotation in (Path, Location))


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


def present_in(raw_dir: Location) -> Callable[[date], bool]:
    """Whether a date's partition is in `raw_dir`: the question `due_runs` asks of each date."""
    return functools.partial(partition_exists, raw_dir)


def gold_path(gold_dir: Location, day: date) -> Location:
    """`<gold_dir>/summary_harian_YYYY-MM-DD.csv`."""
    return join(gold_dir, f"summary_harian_{day.isoformat()}.csv")


def catchup_bound(bound: date, tz: str) -> datetime:
    """A catch-up bound as an aware datetime: a date is its midnight in `tz`, a naive
    date-time is wall time in `tz`, an aware one keeps its instant."""
    zone = ZoneInfo(tz)
    if not isinstance(bound, datetime):
        return datetime.combine(bound, time(), tzinfo=zone)
    if bound.tzinfo is None:
        return bound.replace(tzinfo=zone)
    return bound.astimezone(zone)


def stack_environment(cwd: Path | None = None) -> dict[str, str]:
    """The non-empty TOKOKITA_* variables of the local Airflow stack of the project folder
    `cwd` (`STACK_SETTINGS_FILE`), or {} when it has none."""
    path = (Path.cwd() if cwd is None else Path(cwd)) / STACK_SETTINGS_FILE
    if not path.is_file():
        return {}
    import io

    from dotenv import dotenv_values

    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: not valid UTF-8 at byte offset {exc.start} (line {line}); "
                          "the local stack's settings file is written in UTF-8") from None
    return {name: value for name, value in dotenv_values(stream=io.StringIO(text)).items()
            if name.startswith("TOKOKITA_") and value}


def _validated(build: Callable[[], Settings]) -> Settings:
    """`build()`, its ValidationError as one ConfigError naming each setting and its source."""
    try:
        return build()
    except ValidationError as exc:
        lines = [_error_line(error) for error in exc.errors(include_url=False)]
        raise ConfigError("; ".join(lines)) from None


def _error_line(error: Any) -> str:
    name = str(error["loc"][0]) if error["loc"] else ""
    text = error["msg"]
    if not name:  # a rule across settings: its text names them and their sources
        return text
    source = _origin(name)
    if error["type"] == "extra_forbidden":
        return f"{source}: unknown setting {name!r}; known: {sorted(SETTINGS)}"
    if error["type"] == "tokokita_problem":
        return f"{source}: {name}: {text}"
    return f"{source}: {name} {text}"


def load_settings(
    config_path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
    stack: Mapping[str, str] | None = None,
    in_airflow: bool = False,
) -> Settings:
    """The settings from the explicit `overrides` (None: not given), the environment `env`
    (default: os.environ), the stack's variables `stack` (the command line's
    `stack_environment`), the YAML file (`config_path`, else $TOKOKITA_CONFIG, else
    config/pipeline.yaml when it exists) and the defaults; relative paths against `cwd`
    (`in_airflow`: for the Airflow adapter, which reads the warehouse of `warehouse_conn_id`
    from its connection afterwards)."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    explicit = config_path or env.get("TOKOKITA_CONFIG")
    path = Path(explicit) if explicit else DEFAULT_CONFIG_PATH
    if not path.is_absolute():
        path = cwd / path
    if path.exists():
        from_file = _read_yaml(path)
    elif explicit:
        raise ConfigError(f"{path}: config file not found")
    else:
        from_file = {}

    def from_vars(variables: Mapping[str, str]) -> dict[str, str]:
        return {name: variables[var] for var, name in ENV_VARS.items() if variables.get(var)}

    stack_file = cwd / STACK_SETTINGS_FILE
    layers = (
        _Layer(Settings, from_vars(env), env_var),
        _Layer(Settings, from_vars(stack or {}), lambda name: f"{stack_file} ({env_var(name)})"),
        _Layer(Settings, from_file, lambda name: str(path)),
    )
    given = {name: value for name, value in (overrides or {}).items() if value is not None}
    origins = {name: flag(name) for name in given}
    for layer in layers:
        for name in layer.values:
            origins.setdefault(name, layer.origin(name))
    with _loading(_Load(layers=layers, origins=origins, in_airflow=in_airflow)):
        settings = _validated(lambda: Settings(**given))
    resolved = {name: _absolute(getattr(settings, name), cwd) for name in PATH_SETTINGS}
    settings = settings.model_copy(update={
        **resolved, "warehouse_url": _absolute_sqlite_url(settings.warehouse_url, cwd)})
    settings._origins = origins
    return settings


#: path -> ((mtime, size), its settings): a file read again unchanged is not parsed again (the
#: DAG processor parses the DAG file, and so reads the settings, over and over)
_FILE_CACHE: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}


def _read_yaml(path: Path) -> dict[str, Any]:
    """The YAML file's settings; dates and date-times stay text, so that their setting's
    validator reads them and a bad one is an error naming its setting."""
    try:
        stat = path.stat()
        version = (stat.st_mtime_ns, stat.st_size)
        if (cached := _FILE_CACHE.get(path)) and cached[0] == version:
            return dict(cached[1])
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    import yaml

    try:
        loaded = yaml.load(content, Loader=_text_dates_loader()) or {}  # noqa: S506 (safe)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: config must be a mapping of settings")
    for key in loaded:
        if key not in SETTINGS:
            raise ConfigError(f"{path}: unknown setting {key!r}; known: {sorted(SETTINGS)}")
    _FILE_CACHE[path] = (version, loaded)
    return dict(loaded)


@cache
def _text_dates_loader() -> type:
    """PyYAML's safe loader (libyaml's when installed) without its timestamp resolver."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class TextDatesLoader(base):
        yaml_implicit_resolvers: ClassVar[dict] = {
            first: [(tag, pattern) for tag, pattern in resolvers
                    if tag != "tag:yaml.org,2002:timestamp"]
            for first, resolvers in base.yaml_implicit_resolvers.items()}

    return TextDatesLoader


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


# -- showing the settings ---------------------------------------------------------------------

def _mask_notifiers(text: str) -> str:
    import json

    try:
        specs = json.loads(text)
    except ValueError:
        return text
    if not isinstance(specs, list):
        return text
    return json.dumps([{**spec, "kwargs": masked_arguments(spec["kwargs"])}
                       if isinstance(spec, dict) and "kwargs" in spec else spec
                       for spec in specs])


def shown(settings: Settings) -> list[tuple[str, str, str]]:
    """Every setting as (name, value as text with credentials masked, source)."""
    rows = []
    for name in SETTINGS:
        value = getattr(settings, name)
        if name == "notifiers":
            text = _mask_notifiers(value)
        elif isinstance(value, str):
            text = mask_url(value)
        elif isinstance(value, date):
            text = value.isoformat()
        else:
            text = "" if value is None else str(value)
        rows.append((name, text, settings.source(name)))
    return rows
